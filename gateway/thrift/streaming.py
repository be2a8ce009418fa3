"""Old name of :mod:`gateway.thrift.reply_translator`, kept until the dispatcher imports the new one."""
from gateway.thrift.reply_translator import reply_translator  # noqa: F401
