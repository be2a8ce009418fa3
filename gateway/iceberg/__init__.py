"""The Iceberg REST Catalog over the Hive Metastore (issue 22), served by the ``iceberg-rest``
service kind (:mod:`gateway.iceberg.kind`).

Follows apache/iceberg ``open-api/rest-catalog-open-api.yaml``; tables are stored the way
Iceberg's ``HiveCatalog`` stores them (``table_type=ICEBERG``, ``metadata_location``), and every
piece of Iceberg logic (metadata, requirements, updates, file IO) is PyIceberg's. Modules:
``engine`` (the request side of the kind, imported at a service's first request: the route
of a path, the operation's answer), ``kind`` (the service kind), ``errors`` (the spec's error
model and ``IcebergErrors``, the kind's one error map), ``routes`` (the route table: method, path, request and
response models, handler and declared access; the models read the body and write the answer),
``access`` (what each route row needs: Ranger access, objects, named rules; enforced once before
the handler), ``paths`` (how a path
picks a route), ``service_state`` (``ServiceState``, the serving service's state the handlers
use), ``bodies`` (request
and response bodies, query parameters), ``hive_tables`` (Iceberg metadata ↔ HMS tables), ``files`` (metadata files),
``objects`` (tables and views as one type of catalog object, ``TABLE`` and ``VIEW``),
``catalog`` (one request's HMS client, policy view, and the lookup and drop of both),
``namespaces``, ``tables`` (also what views share: listing, exists, drop, rename), ``views``,
``commit`` (the HiveCatalog commit protocol under HMS's lock, for tables and views), ``transactions`` (multi-table
commits), ``register``, ``metrics_report``, ``oauth`` (the OAuth2 token endpoint); storage
access on S3 (issue 23; the gateway's key and S3 settings, the HMS parameters of an Iceberg
table and the gateway's FileIO are :mod:`gateway.lakehouse`'s, which the change feed shares):
``vending`` (STS credentials scoped to a table), ``delegation`` (``X-Iceberg-Access-Delegation`` and the
credentials endpoint), ``signer`` (remote signing); server-side scan planning (issue 42):
``scan_plans`` (the four operations), ``planning`` (PyIceberg's planning on the gateway's
FileIO, the answer's JSON), ``manifest_cache`` (parsed manifests by path), ``plan_store`` (plan
ids, plan tasks, submitted plans, the settings), ``plan_models`` (the spec's models),
``read_rules`` (what a read of a table's files hands out, once judged as a load).
"""
