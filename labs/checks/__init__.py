"""One module per claim of ../shared/claims.md; each registers itself with @check."""
