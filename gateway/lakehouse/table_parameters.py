"""The HMS table parameters by which Iceberg's ``HiveCatalog`` marks an Iceberg table
(``table_type=ICEBERG``, ``metadata_location``, ``previous_metadata_location``): PyIceberg's
names (``pyiceberg.catalog``), kept here so that a kind reading HMS tables (the change feed)
need not import PyIceberg to recognise a commit. ``tests/unit/test_lazy_imports.py`` checks
they are PyIceberg's."""

from __future__ import annotations

__all__ = ["ICEBERG", "METADATA_LOCATION", "PREVIOUS_METADATA_LOCATION", "TABLE_TYPE"]

TABLE_TYPE = "table_type"
ICEBERG = "iceberg"  # the value of TABLE_TYPE, compared in any case
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
