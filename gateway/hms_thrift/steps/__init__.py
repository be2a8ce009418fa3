"""The pipeline steps only the ``hms-thrift`` kind runs (its call and reply hooks read the
Thrift message): registered by role in :data:`gateway.pipeline.steps.STEPS` beside the steps
every kind shares."""
