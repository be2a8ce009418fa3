"""Metastore change feed: HMS's notification log, polled once per upstream, served over HTTP.

Modules: ``kind`` (the ``event-stream`` service kind), ``model`` (the event value), ``messages`` (decoding HMS's message formats), ``ring``
(the bounded in-memory window), ``poller`` (get_current_notificationEventId /
get_next_notification), ``feed`` (the shared ChangeFeed clients wait on).
"""
