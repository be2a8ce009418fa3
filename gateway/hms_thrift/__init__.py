"""The ``hms-thrift`` wing: the Hive Metastore's Thrift RPC over HTTP POST (MS-HMSHTTP).

Its service kind (:mod:`.kind`), the Thrift fields of one request (:mod:`.exchange`), the
whole reply a reply-side step reads (:mod:`.reply`), and the steps only this kind runs
(:mod:`.steps`: method exposure, the ``set_ugi`` claim, catalog policy, ownership assertion,
with the partition splice the policy uses). It stands on the shared floors: the Thrift
translator core (:mod:`gateway.thrift`), the pipeline every kind shares (:mod:`gateway.pipeline`),
the upstream pools and the metadata cache.
"""
