"""HMS Gateway: a Knox-style authenticating HTTPS gateway for the Apache Hive Metastore."""

__version__ = "0.1.0"
