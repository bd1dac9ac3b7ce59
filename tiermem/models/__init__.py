"""LLM and embedding providers behind two small protocols, registered by name."""
