"""Redaction before the judge (`--redact`): `detectors` finds identifiers, `redactor` replaces
them by typed placeholders and counts them."""
