"""host."""
