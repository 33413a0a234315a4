"""dranet-cloud plugin for Oracle Cloud Infrastructure: RDMA topology and VNIC facts."""
