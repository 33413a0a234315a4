-- IPAM database written by dranet-cloud e159219 (schema 1), dumped with iterdump().
-- Made by running e159219's SqliteStore (allocate/reserve under gen1 DRA names, interface
-- names, a bare MAC and a bare PCI address); tests/test_nic_identity.py loads it into a
-- file and opens it with today's store.
BEGIN TRANSACTION;
CREATE TABLE allocations (
    id         INTEGER PRIMARY KEY,
    family     INTEGER NOT NULL CHECK (family IN (4, 6)),
    addr_key   TEXT    NOT NULL,  -- address as fixed-width hex: text order = numeric order
    address    TEXT    NOT NULL,  -- host CIDR as handed out (10.0.0.5/32)
    pool       TEXT    NOT NULL,
    device     TEXT    NOT NULL,
    claim_uid  TEXT    NOT NULL,
    static     INTEGER NOT NULL CHECK (static IN (0, 1)),
    created_at REAL    NOT NULL,  -- seconds since the Unix epoch
    UNIQUE (family, addr_key)
);
INSERT INTO "allocations" VALUES(1,4,'0a1400a4','10.20.0.164/32','local-ipam','pci-0000-00-05-0','claim-gen1',0,1795161600.0);
INSERT INTO "allocations" VALUES(2,6,'fd000020000000003dbed9c9146b1dd3','fd00:20::3dbe:d9c9:146b:1dd3/128','local-ipam','pci-0000-00-05-0','claim-gen1',0,1795161600.0);
INSERT INTO "allocations" VALUES(3,4,'0a140018','10.20.0.24/32','local-ipam','eth2','claim-ifname',0,1795161601.0);
INSERT INTO "allocations" VALUES(4,4,'0a1400eb','10.20.0.235/32','local-ipam','pci-0000-00-05-0','claim-both',0,1795161602.0);
INSERT INTO "allocations" VALUES(5,4,'0a140070','10.20.0.112/32','local-ipam','eth1','claim-both',0,1795161603.0);
INSERT INTO "allocations" VALUES(6,6,'fd000030000000000000000000000c09','fd00:30::c09/128','aliyun','00:16:3e:00:00:02','claim-mac',0,1795161604.0);
INSERT INTO "allocations" VALUES(7,4,'0a1e0076','10.30.0.118/32','aws','0000:00:07.0','claim-pci',0,1795161605.0);
INSERT INTO "allocations" VALUES(8,4,'0a14004d','10.20.0.77/32','local-ipam','eth1','claim-static',1,1795161606.0);
CREATE UNIQUE INDEX allocations_one_dynamic_per_family
    ON allocations (pool, device, claim_uid, family) WHERE static = 0;
CREATE INDEX allocations_by_owner ON allocations (pool, device, claim_uid);
CREATE INDEX allocations_by_age ON allocations (created_at);
COMMIT;
PRAGMA user_version = 1;
