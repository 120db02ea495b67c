"""Denies any stack that exports `plain`: proof that the pack ran and judged the program's stack."""

from pulumi_policy import EnforcementLevel, PolicyPack, StackValidationArgs, StackValidationPolicy


def no_plain_output(args: StackValidationArgs, report_violation) -> None:
    for resource in args.resources:
        if resource.resource_type == "pulumi:pulumi:Stack" and resource.props.get("plain"):
            report_violation("hostcheck: the stack exports 'plain'; remove that output")


PolicyPack(
    name="hostcheck-policy",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        StackValidationPolicy(
            name="no-plain-output",
            description="The stack must not export 'plain'.",
            validate=no_plain_output,
        )
    ],
)
