"""One module per claim of the course texts (docs/labs/ quotes each); each registers itself with @check."""
