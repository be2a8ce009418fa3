"""What the ``iceberg-rest`` kind and the change feed (``event-stream``) both need of the tables
and files under HMS, on a floor both wings stand on (neither imports the other's modules):

``table_parameters`` (the HMS parameters by which Iceberg's ``HiveCatalog`` marks an Iceberg
table), ``storage`` (an S3 warehouse's settings and the gateway's own key for it) and
``file_io`` (the gateway's FileIO for metadata files and manifests, built from a service's own
options only).
"""
