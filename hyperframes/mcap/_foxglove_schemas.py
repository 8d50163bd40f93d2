"""Foxglove protobuf schemas (FileDescriptorSets) as foxglove-sdk 0.30.3 ships them.

Vendored so that export needs only the ``mcap`` library; tests/test_mcap_messages.py
checks them against foxglove-sdk where it is installed (the ``dev`` extra). Regenerate:
``python -m hyperframes.mcap._foxglove_schemas > hyperframes/mcap/_foxglove_schemas.py``.
"""

from __future__ import annotations

import base64

__all__ = ["FOXGLOVE_SDK_VERSION", "DESCRIPTORS"]

FOXGLOVE_SDK_VERSION = "0.30.3"

# schema name -> FileDescriptorSet (protobuf), base64
_B64: dict[str, str] = {
    "foxglove.CompressedImage": (
        "Cv8BCh9nb29nbGUvcHJvdG9idWYvdGltZXN0YW1wLnByb3RvEg9nb29nbGUucHJvdG9idWYiOwoJVGltZXN0"
        "YW1wEhgKB3NlY29uZHMYASABKANSB3NlY29uZHMSFAoFbmFub3MYAiABKAVSBW5hbm9zQoUBChNjb20uZ29v"
        "Z2xlLnByb3RvYnVmQg5UaW1lc3RhbXBQcm90b1ABWjJnb29nbGUuZ29sYW5nLm9yZy9wcm90b2J1Zi90eXBl"
        "cy9rbm93bi90aW1lc3RhbXBwYvgBAaICA0dQQqoCHkdvb2dsZS5Qcm90b2J1Zi5XZWxsS25vd25UeXBlc2IG"
        "cHJvdG8zCugBCh5mb3hnbG92ZS9Db21wcmVzc2VkSW1hZ2UucHJvdG8SCGZveGdsb3ZlGh9nb29nbGUvcHJv"
        "dG9idWYvdGltZXN0YW1wLnByb3RvIpIBCg9Db21wcmVzc2VkSW1hZ2USOAoJdGltZXN0YW1wGAEgASgLMhou"
        "Z29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcFIJdGltZXN0YW1wEhkKCGZyYW1lX2lkGAQgASgJUgdmcmFtZUlk"
        "EhIKBGRhdGEYAiABKAxSBGRhdGESFgoGZm9ybWF0GAMgASgJUgZmb3JtYXRiBnByb3RvMw=="
    ),
    "foxglove.CompressedVideo": (
        "Cv8BCh9nb29nbGUvcHJvdG9idWYvdGltZXN0YW1wLnByb3RvEg9nb29nbGUucHJvdG9idWYiOwoJVGltZXN0"
        "YW1wEhgKB3NlY29uZHMYASABKANSB3NlY29uZHMSFAoFbmFub3MYAiABKAVSBW5hbm9zQoUBChNjb20uZ29v"
        "Z2xlLnByb3RvYnVmQg5UaW1lc3RhbXBQcm90b1ABWjJnb29nbGUuZ29sYW5nLm9yZy9wcm90b2J1Zi90eXBl"
        "cy9rbm93bi90aW1lc3RhbXBwYvgBAaICA0dQQqoCHkdvb2dsZS5Qcm90b2J1Zi5XZWxsS25vd25UeXBlc2IG"
        "cHJvdG8zCugBCh5mb3hnbG92ZS9Db21wcmVzc2VkVmlkZW8ucHJvdG8SCGZveGdsb3ZlGh9nb29nbGUvcHJv"
        "dG9idWYvdGltZXN0YW1wLnByb3RvIpIBCg9Db21wcmVzc2VkVmlkZW8SOAoJdGltZXN0YW1wGAEgASgLMhou"
        "Z29vZ2xlLnByb3RvYnVmLlRpbWVzdGFtcFIJdGltZXN0YW1wEhkKCGZyYW1lX2lkGAIgASgJUgdmcmFtZUlk"
        "EhIKBGRhdGEYAyABKAxSBGRhdGESFgoGZm9ybWF0GAQgASgJUgZmb3JtYXRiBnByb3RvMw=="
    ),
    "foxglove.PointCloud": (
        "Cq8CCiFmb3hnbG92ZS9QYWNrZWRFbGVtZW50RmllbGQucHJvdG8SCGZveGdsb3ZlIvcBChJQYWNrZWRFbGVt"
        "ZW50RmllbGQSEgoEbmFtZRgBIAEoCVIEbmFtZRIWCgZvZmZzZXQYAiABKAdSBm9mZnNldBI8CgR0eXBlGAMg"
        "ASgOMiguZm94Z2xvdmUuUGFja2VkRWxlbWVudEZpZWxkLk51bWVyaWNUeXBlUgR0eXBlIncKC051bWVyaWNU"
        "eXBlEgsKB1VOS05PV04QABIJCgVVSU5UOBABEggKBElOVDgQAhIKCgZVSU5UMTYQAxIJCgVJTlQxNhAEEgoK"
        "BlVJTlQzMhAFEgkKBUlOVDMyEAYSCwoHRkxPQVQzMhAHEgsKB0ZMT0FUNjQQCGIGcHJvdG8zCnMKGWZveGds"
        "b3ZlL1F1YXRlcm5pb24ucHJvdG8SCGZveGdsb3ZlIkQKClF1YXRlcm5pb24SDAoBeBgBIAEoAVIBeBIMCgF5"
        "GAIgASgBUgF5EgwKAXoYAyABKAFSAXoSDAoBdxgEIAEoAVIBd2IGcHJvdG8zCl8KFmZveGdsb3ZlL1ZlY3Rv"
        "cjMucHJvdG8SCGZveGdsb3ZlIjMKB1ZlY3RvcjMSDAoBeBgBIAEoAVIBeBIMCgF5GAIgASgBUgF5EgwKAXoY"
        "AyABKAFSAXpiBnByb3RvMwrJAQoTZm94Z2xvdmUvUG9zZS5wcm90bxIIZm94Z2xvdmUaGWZveGdsb3ZlL1F1"
        "YXRlcm5pb24ucHJvdG8aFmZveGdsb3ZlL1ZlY3RvcjMucHJvdG8ibQoEUG9zZRItCghwb3NpdGlvbhgBIAEo"
        "CzIRLmZveGdsb3ZlLlZlY3RvcjNSCHBvc2l0aW9uEjYKC29yaWVudGF0aW9uGAIgASgLMhQuZm94Z2xvdmUu"
        "UXVhdGVybmlvblILb3JpZW50YXRpb25iBnByb3RvMwr/AQofZ29vZ2xlL3Byb3RvYnVmL3RpbWVzdGFtcC5w"
        "cm90bxIPZ29vZ2xlLnByb3RvYnVmIjsKCVRpbWVzdGFtcBIYCgdzZWNvbmRzGAEgASgDUgdzZWNvbmRzEhQK"
        "BW5hbm9zGAIgASgFUgVuYW5vc0KFAQoTY29tLmdvb2dsZS5wcm90b2J1ZkIOVGltZXN0YW1wUHJvdG9QAVoy"
        "Z29vZ2xlLmdvbGFuZy5vcmcvcHJvdG9idWYvdHlwZXMva25vd24vdGltZXN0YW1wcGL4AQGiAgNHUEKqAh5H"
        "b29nbGUuUHJvdG9idWYuV2VsbEtub3duVHlwZXNiBnByb3RvMwr7AgoZZm94Z2xvdmUvUG9pbnRDbG91ZC5w"
        "cm90bxIIZm94Z2xvdmUaIWZveGdsb3ZlL1BhY2tlZEVsZW1lbnRGaWVsZC5wcm90bxoTZm94Z2xvdmUvUG9z"
        "ZS5wcm90bxofZ29vZ2xlL3Byb3RvYnVmL3RpbWVzdGFtcC5wcm90byLyAQoKUG9pbnRDbG91ZBI4Cgl0aW1l"
        "c3RhbXAYASABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wUgl0aW1lc3RhbXASGQoIZnJhbWVfaWQY"
        "AiABKAlSB2ZyYW1lSWQSIgoEcG9zZRgDIAEoCzIOLmZveGdsb3ZlLlBvc2VSBHBvc2USIQoMcG9pbnRfc3Ry"
        "aWRlGAQgASgHUgtwb2ludFN0cmlkZRI0CgZmaWVsZHMYBSADKAsyHC5mb3hnbG92ZS5QYWNrZWRFbGVtZW50"
        "RmllbGRSBmZpZWxkcxISCgRkYXRhGAYgASgMUgRkYXRhYgZwcm90bzM="
    ),
    "foxglove.RawImage": (
        "Cv8BCh9nb29nbGUvcHJvdG9idWYvdGltZXN0YW1wLnByb3RvEg9nb29nbGUucHJvdG9idWYiOwoJVGltZXN0"
        "YW1wEhgKB3NlY29uZHMYASABKANSB3NlY29uZHMSFAoFbmFub3MYAiABKAVSBW5hbm9zQoUBChNjb20uZ29v"
        "Z2xlLnByb3RvYnVmQg5UaW1lc3RhbXBQcm90b1ABWjJnb29nbGUuZ29sYW5nLm9yZy9wcm90b2J1Zi90eXBl"
        "cy9rbm93bi90aW1lc3RhbXBwYvgBAaICA0dQQqoCHkdvb2dsZS5Qcm90b2J1Zi5XZWxsS25vd25UeXBlc2IG"
        "cHJvdG8zCqACChdmb3hnbG92ZS9SYXdJbWFnZS5wcm90bxIIZm94Z2xvdmUaH2dvb2dsZS9wcm90b2J1Zi90"
        "aW1lc3RhbXAucHJvdG8i0QEKCFJhd0ltYWdlEjgKCXRpbWVzdGFtcBgBIAEoCzIaLmdvb2dsZS5wcm90b2J1"
        "Zi5UaW1lc3RhbXBSCXRpbWVzdGFtcBIZCghmcmFtZV9pZBgHIAEoCVIHZnJhbWVJZBIUCgV3aWR0aBgCIAEo"
        "B1IFd2lkdGgSFgoGaGVpZ2h0GAMgASgHUgZoZWlnaHQSGgoIZW5jb2RpbmcYBCABKAlSCGVuY29kaW5nEhIK"
        "BHN0ZXAYBSABKAdSBHN0ZXASEgoEZGF0YRgGIAEoDFIEZGF0YWIGcHJvdG8z"
    ),
}

DESCRIPTORS: dict[str, bytes] = {k: base64.b64decode(v) for k, v in _B64.items()}


def _render() -> str:  # pragma: no cover - needs foxglove-sdk; run by hand
    """This module's source, regenerated from the installed foxglove-sdk."""
    import importlib.metadata  # noqa: PLC0415
    import inspect  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from foxglove.messages import (  # noqa: PLC0415
        CompressedImage,
        CompressedVideo,
        PointCloud,
        RawImage,
    )

    source = inspect.getsource(sys.modules[__name__])
    version = importlib.metadata.version("foxglove-sdk")
    source = source.replace(FOXGLOVE_SDK_VERSION, version)
    body = []
    for cls in (CompressedImage, CompressedVideo, PointCloud, RawImage):
        schema = cls.get_schema()
        text = base64.b64encode(schema.data).decode()
        body.append(f'    "{schema.name}": (')
        body += [f'        "{text[i : i + 84]}"' for i in range(0, len(text), 84)]
        body.append("    ),")
    start = source.index("_B64: dict[str, str] = {") + len("_B64: dict[str, str] = {\n")
    end = source.index("}\n\nDESCRIPTORS")
    return source[:start] + "\n".join(body) + "\n" + source[end:]


if __name__ == "__main__":  # pragma: no cover
    print(_render(), end="")
