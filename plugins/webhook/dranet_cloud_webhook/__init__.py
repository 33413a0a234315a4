"""dranet-cloud plugin: a client for DRANET's Bring-Your-Own-Provider (BYODP) webhooks."""
