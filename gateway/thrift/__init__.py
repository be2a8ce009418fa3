"""Thrift translation core: TJSONProtocol (HTTP clients) ↔ strict TBinaryProtocol (HMS).

Public API lives in :mod:`gateway.thrift.translate`, :mod:`gateway.thrift.schema` and
:mod:`gateway.thrift.errors`.
"""
