"""nosqltune: an auto-tuner for NoSQL datastores driven by real benchmark trials."""

__version__ = "0.1.0"
