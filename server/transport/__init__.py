"""Transports: serving HTTP/stdio, the stdlib-only stdio bridge, and the daemon file that lets a bridge find its daemon."""
