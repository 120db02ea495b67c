"""hack/toolenv.py share-salt: a new stack file takes the encryption salt of the stack it builds on
(an experiment its tenant's, a tenant its platform's), so one command derives one key."""

from __future__ import annotations

from pathlib import Path

import yaml

from toolenv import share_salt

SALT = "v1:cMCn8Wi07uc=:v1:91Rcg9pnp19i7Yzd:k8XyAcRIGtEVHwBlLw7TsCoKB9j5Ag=="


def _write(stacks: Path, stack: str, config: dict[str, object], salt: str | None = None) -> Path:
    path = stacks / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({**({"encryptionsalt": salt} if salt else {}), "config": config}))
    return path


def test_an_experiment_takes_its_tenants_salt_and_a_tenant_its_platforms(tmp_path: Path) -> None:
    _write(tmp_path, "platform-dev", {"tfk8s:kind": "platform"}, SALT)
    tenant = _write(tmp_path, "tenant-alice", {"tfk8s:kind": "tenant", "tfk8s:platformStack": "platform-dev"})
    experiment = _write(tmp_path, "dev", {"tfk8s:kind": "experiment", "tfk8s:tenantStack": "organization/tfk8s/tenant-alice"})
    before = yaml.safe_load(experiment.read_text())["config"]
    assert share_salt(experiment) == SALT  # through the tenant, which had none yet: both get the platform's
    assert yaml.safe_load(experiment.read_text()) == {"encryptionsalt": SALT, "config": before}  # nothing else changed
    assert yaml.safe_load(tenant.read_text())["encryptionsalt"] == SALT


def test_a_stack_that_has_a_salt_keeps_it(tmp_path: Path) -> None:
    _write(tmp_path, "platform-dev", {"tfk8s:kind": "platform"}, SALT)
    own = "v1:AAAAAAAAAAA=:v1:BBBBBBBBBBBBBBBB:CCCC"
    tenant = _write(tmp_path, "tenant-alice", {"tfk8s:platformStack": "platform-dev"}, own)
    text = tenant.read_text()
    assert share_salt(tenant) == own and tenant.read_text() == text


def test_without_a_salted_upstream_pulumi_makes_one_as_always(tmp_path: Path) -> None:
    platform = _write(tmp_path, "platform-dev", {"tfk8s:kind": "platform"})
    tenant = _write(tmp_path, "tenant-alice", {"tfk8s:platformStack": "platform-dev"})
    missing = _write(tmp_path, "dev", {"tfk8s:tenantStack": "tenant-gone"})
    for path in (platform, tenant, missing):
        text = path.read_text()
        assert share_salt(path) is None and path.read_text() == text
