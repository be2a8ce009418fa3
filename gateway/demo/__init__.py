"""Demo pieces: an embedded Hive Metastore 2.3.10 (from the PySpark jars) and the PySpark job that seeds it."""
