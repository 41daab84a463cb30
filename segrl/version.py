"""segrl's version, at the bottom of the layers so that what records it (checkpoints, run tags)
need not import the package's top (``segrl.__version__`` is this one)."""

__version__ = "0.1.0"
