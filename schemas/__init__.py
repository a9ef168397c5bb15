"""The Avro event contract: schemas (every version kept), the single-object codec, compatibility checks."""
