"""nsdiag's version, in a module of its own: renderers and the session writer name it without
importing the package's `load()` (and through it collect/)."""

__version__ = "0.1.0"
