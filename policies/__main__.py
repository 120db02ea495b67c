"""The tfk8s policy pack: `pulumi preview --policy-pack policies` (rules in tfk8s_policies)."""

from pulumi_policy import PolicyPack
from tfk8s_policies import POLICIES

PolicyPack(name="tfk8s", policies=POLICIES)
