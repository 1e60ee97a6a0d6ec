"""Typed fields of a Kubernetes object sizer does not read, checked so that a manifest the API server refuses is not
passed.

`sizer check` reads a few fields of the object that runs the server (replicas, the container's command line, its GPU
resources; sizer/inputs/manifests/fields.py). The API server decodes the whole object into Go structs first, and
refuses a value of the wrong JSON type anywhere in it: `containerPort: "8000"`, `initialDelaySeconds: "30"`,
`hostNetwork: "true"`, a resource quantity `memory: lots` (kubectl: "cannot unmarshal string into Go struct field
ContainerPort.spec.template.spec.containers.ports.containerPort of type int32"). A manifest kubectl refuses does not
deploy, so it is refused here too, naming the field, rather than checked and passed.

The fields below have the one type wherever they appear in core/v1, apps/v1, batch/v1 and the pod templates the other
kinds read (sizer/inputs/manifests/kubernetes.py KINDS) embed; free-form maps (labels, annotations, node selectors, a
ConfigMap's data) are not walked. A number written with a point (`8000.0`) is the integer kubectl sends (its YAML to
JSON conversion writes 8000), so it is accepted.
"""

from __future__ import annotations

import math
import re

from sizer.errors import InputError
from validation.errors import excerpt
from validation.schema import join

# int32 / int64 fields (PodSpec, Container, Probe, SecurityContext, ContainerPort, volume sources, DeploymentSpec,
# StatefulSetSpec, JobSpec); the int64 ones (their Go types in k8s.io/api)
INTEGER_FIELDS = frozenset({
    "containerPort", "hostPort", "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "successThreshold",
    "failureThreshold", "terminationGracePeriodSeconds", "activeDeadlineSeconds", "minReadySeconds",
    "revisionHistoryLimit", "progressDeadlineSeconds", "backoffLimit", "completions", "ttlSecondsAfterFinished",
    "runAsUser", "runAsGroup", "fsGroup", "defaultMode", "priority",
})
INT64_FIELDS = frozenset({"terminationGracePeriodSeconds", "activeDeadlineSeconds", "runAsUser", "runAsGroup",
                          "fsGroup"})
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
# A container's ports, as the API server validates them (ValidateContainerPorts: containerPort 1-65535, hostPort
# 0-65535 where given); GRPCAction.port is an int32, not an IntOrString as httpGet's and tcpSocket's
PORT_RANGES = {"containerPort": (1, 65535), "hostPort": (0, 65535), "port": (1, 65535)}
# Fields whose Go type is a string wherever they appear in these objects: a number or a boolean there is refused
# ("cannot unmarshal number into Go struct field ContainerPort.protocol of type string")
STRING_FIELDS = frozenset({
    "name", "image", "imagePullPolicy", "protocol", "mountPath", "subPath", "restartPolicy", "dnsPolicy",
    "serviceAccountName", "schedulerName", "priorityClassName", "claimName", "medium", "scheme", "operator",
    "effect", "workingDir", "terminationMessagePath", "terminationMessagePolicy",
})
BOOLEAN_FIELDS = frozenset({
    "hostNetwork", "hostIPC", "hostPID", "hostUsers", "privileged", "readOnlyRootFilesystem", "runAsNonRoot",
    "allowPrivilegeEscalation", "stdin", "stdinOnce", "tty", "readOnly", "automountServiceAccountToken",
    "enableServiceLinks", "shareProcessNamespace", "setHostnameAsFQDN", "paused",
})
# IntOrString: a port number or a port's name (httpGet.port, tcpSocket.port)
INT_OR_STRING_FIELDS = frozenset({"port", "targetPort"})
# Maps of arbitrary keys (and, for data, values sizer does not type): not walked
FREE_FORM = frozenset({"labels", "annotations", "matchLabels", "nodeSelector", "selector", "data", "stringData",
                       "binaryData", "env", "envFrom", "args", "command", "serveConfigV2", "parameters"})
# Kubernetes' resource.Quantity text: a decimal number with a binary-SI, decimal-SI or exponent suffix
QUANTITY = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?")
# Integers in YAML 1.1's other bases, which kubectl's YAML reader (sigs.k8s.io/yaml over go-yaml, YAML 1.1) decodes
# as numbers and sizer's reader (YAML 1.2's core schema) keeps as text: octal `0644` (a volume's defaultMode), `0o644`,
# hexadecimal `0x1A4`, binary `0b1010`. Accepted as written: the text alone cannot tell them from a quoted "0644".
YAML11_INTEGER = re.compile(r"[+-]?(?:0[0-7_]+|0o[0-7_]+|0x[0-9a-fA-F_]+|0b[01_]+)")


def yaml11_integer(text: str) -> int | None:
    """The integer kubectl reads `text` as when it is one in YAML 1.1's other bases (YAML11_INTEGER: `010` is 8,
    `0x1A` 26, underscores ignored); None otherwise."""
    t = text.strip()
    if not YAML11_INTEGER.fullmatch(t):
        return None
    body = t.lstrip("+-").replace("_", "")
    base, digits = {"0x": (16, body[2:]), "0o": (8, body[2:]), "0b": (2, body[2:])}.get(body[:2], (8, body))
    if not digits:
        return None
    return (-1 if t.startswith("-") else 1) * int(digits, base)


def check_object_fields(doc: dict, file: str) -> None:
    """Every typed field above in a Kubernetes object (`doc`), refused in one line naming its path where its value is
    of another type: text for an integer or a boolean, a quantity that is no quantity in `resources`."""
    _walk(doc, "", file)


def _walk(node, path: str, file: str) -> None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            _walk(item, f"{path}[{i}]", file)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if not isinstance(key, str) or key in FREE_FORM:
            continue
        where = join(path, key)
        parent = path.rsplit(".", 1)[-1]
        if key in INTEGER_FIELDS:
            check_integer(value, where, file)
            _check_range(key, value, where, file)
        elif key == "port" and parent == "grpc":
            check_integer(value, where, file)
            _check_range(key, value, where, file)
        elif key in STRING_FIELDS:
            if value is not None and not isinstance(value, str):
                raise InputError(file, where, f"expected text, got {excerpt(value)} (Kubernetes' API takes a string "
                                              "here and refuses a number or a boolean: quote it)")
        elif key in BOOLEAN_FIELDS:
            if not isinstance(value, bool):
                raise InputError(file, where, f"expected true or false, got {excerpt(value)} (Kubernetes' API takes a "
                                              "boolean here and refuses text or a number)")
        elif key in INT_OR_STRING_FIELDS and parent in ("httpGet", "tcpSocket"):
            if not isinstance(value, str):
                check_integer(value, where, file)
        elif key in ("limits", "requests") and path.rsplit(".", 1)[-1] == "resources" and isinstance(value, dict):
            for name, amount in value.items():
                _quantity(amount, join(where, str(name)), file)
        elif key == "sizeLimit":
            _quantity(value, where, file)
        else:
            _walk(value, where, file)


def check_integer(value, where: str, file: str) -> None:
    """An int32 / int64 field as the API server decodes it: refused in one line, naming `where`, unless an integer
    (or null, or an integer in YAML 1.1's other bases, which kubectl reads as one)."""
    if value is None or (isinstance(value, str) and YAML11_INTEGER.fullmatch(value.strip())):
        return                  # null: the field unset; an octal or hexadecimal integer as kubectl reads it
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if isinstance(value, bool) or not whole:
        hint = " (Kubernetes' API takes an integer here and refuses a quoted number: write it unquoted)" \
            if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value) else ""
        raise InputError(file, where, f"expected an integer, got {excerpt(value)}{hint}")


def _check_range(key: str, value, where: str, file: str) -> None:
    """An integer field's value within its Go type (int32 unless INT64_FIELDS) and, for a port, the API server's
    range; text kubectl reads as an integer in another base (`010`) is read so first."""
    number = yaml11_integer(value) if isinstance(value, str) else value
    if number is None:
        return
    top = INT64_MAX if key in INT64_FIELDS else INT32_MAX
    low, high = PORT_RANGES.get(key, (-top - 1, top))
    if not low <= number <= high:
        kind = "a port" if key in PORT_RANGES else "an int64" if key in INT64_FIELDS else "an int32"
        raise InputError(file, where, f"expected an integer in [{low}, {high}] ({kind}), got {excerpt(value)}")


def _quantity(value, where: str, file: str) -> None:
    """A resource amount: a number, or text Kubernetes reads as a quantity (`500m`, `16Gi`, `1`). The GPU resources'
    own bounds are checked where sizer reads them (sizer/inputs/manifests/kubernetes.py pod_gpus)."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)) or \
        (isinstance(value, str) and QUANTITY.fullmatch(value.strip()) is not None)
    if not ok:
        raise InputError(file, where, f"expected a Kubernetes quantity (a number, or text such as 500m, 16Gi), got "
                                      f"{excerpt(value)}")
