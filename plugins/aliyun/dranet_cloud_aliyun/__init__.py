"""dranet-cloud plugin for aliyun."""
