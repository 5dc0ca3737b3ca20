"""The release of this code, as the MCP handshake, ``health_check`` and ``gitmail --version`` report it.

It lives at the bottom of the layers so any layer may name it; the package
root re-exports it as ``gitmail.__version__``. ``pyproject.toml`` holds the
same number (a test keeps the two equal).
"""

__version__ = "0.1.0"
