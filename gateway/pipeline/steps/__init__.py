"""Pipeline steps, one module each; :func:`gateway.topology.build_topology` composes them per
service in data-path order: authentication → identity assertion → service ACL → method
exposure → ownership assertion."""
