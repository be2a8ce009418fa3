"""How a dispatch to an upstream HMS can fail, each mapped to one HTTP status by the dispatch."""


class UpstreamError(Exception):
    """Base class; ``str()`` is a short reason safe to show to the client."""

    status = 502


class UpstreamUnavailable(UpstreamError):
    """No upstream accepted the connection, or it broke before the reply was complete (502)."""

    status = 502


class UpstreamConnectFailed(UpstreamUnavailable):
    """No connection could be opened: the request was never sent, so another upstream may take it."""


class UpstreamTimeout(UpstreamError):
    """The upstream did not answer within the configured time (504)."""

    status = 504


class UpstreamBadReply(UpstreamError):
    """The upstream's reply was not a well-formed strict-binary Thrift message (502)."""

    status = 502
