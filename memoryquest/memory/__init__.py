"""Long-term memory: extraction with upsert, consolidation, and replay to any date."""
