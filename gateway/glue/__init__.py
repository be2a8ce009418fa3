"""The AWS Glue Data Catalog API (AWS JSON 1.1) over a Hive Metastore: errors as Glue answers
them (:mod:`.errors`), HMS Thrift objects in Glue's shapes (:mod:`.shapes`), Glue's opaque
``NextToken`` pagination (:mod:`.pagination`) and the operations (:mod:`.operations`). The
service kind that serves them is :mod:`gateway.glue.kind`."""
