"""Metastore change feed: HMS's notification log, polled once per upstream, served over HTTP.

Modules: ``ring`` (the bounded in-memory window), ``feed`` (the shared ChangeFeed clients wait
on, a subscriber of :mod:`gateway.upstream.notification_poller`), ``hcat`` (the seed's HCatalog
messages and topics), ``iceberg`` (Iceberg commits, read when delivered), ``broker`` and
``leader`` (ActiveMQ publishing). The event value and its message decoding live below, in
:mod:`gateway.upstream.notification_event` and :mod:`gateway.upstream.notification_messages`.
"""
