"""The metadata cache of ``hms-thrift``, ``glue`` and ``iceberg-rest`` services (issue 24): HMS's replies to pure reads, kept
exact by HMS's notification log and by the gateway's own writes.

* :mod:`~gateway.cache.settings`: the ``cache:`` options;
* :mod:`~gateway.cache.methods`: which reads are cached, what they depend on, what writes and
  events touch;
* :mod:`~gateway.cache.generations`: the counters shared by the worker processes;
* :mod:`~gateway.cache.store`: the bounded LRU of replies;
* :mod:`~gateway.cache.follower`: the notification-log follower;
* :mod:`~gateway.cache.writes`: writes through the gateway;
* :mod:`~gateway.cache.reads`: :class:`~gateway.cache.reads.MetadataCache`, what a service uses;
* :mod:`~gateway.cache.session`: one request's reads through the gateway's own HMS client
  (the Glue and Iceberg REST kinds).

docs/operations.md ("Metadata cache") is the user's account.
"""
