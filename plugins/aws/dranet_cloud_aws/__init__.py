"""dranet-cloud plugin for AWS EC2.

IMDSv2 facts, per-ENI policy routing and prefix-delegated IPVLAN addresses;
see README.md.
"""
