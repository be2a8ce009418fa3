"""The request pipeline: one request's state (:mod:`.exchange`), the steps that act on it
(:mod:`.steps`, composed per service from its topology, as Knox builds a provider chain), the
typed outcomes that end a request early and their HTTP statuses (:mod:`.outcomes`), and the
reply a reply-side step sees (:mod:`.reply`)."""
