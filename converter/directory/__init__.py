"""A directory inbox and output: the local side of the batch, and its task.

- :mod:`hyperframes.converter.directory.inbox`: ``run_batch``, the inbox rules, ``failed/``
- :mod:`hyperframes.converter.directory.task`: one input converted into ``OUT``, with markers
"""
