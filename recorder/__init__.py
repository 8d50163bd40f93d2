"""On-vehicle recording daemon: sensor sockets in, finalized hyperframe files out."""
