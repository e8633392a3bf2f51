"""The result objects: every number of the CLI's JSON for the same run, as attributes."""

import json


class CheckFailed(Exception):
    """Raised only where a caller asks for it (raise_on_failure=True): a check ran and failed.

    ``.result`` is the result object; the message is its first failure."""

    def __init__(self, result):
        self.result = result
        super().__init__(result.first_failure)


def _wrap(v):
    if isinstance(v, dict):
        return Record(v)
    if isinstance(v, list):
        return [_wrap(e) for e in v]
    return v


class Record:
    """A JSON object with its keys as attributes (``r.max_abs_error``) and as items (``r["3-4"]``)."""

    def __init__(self, data):
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name):
        data = object.__getattribute__(self, "_data")
        if name in data:
            return _wrap(data[name])
        raise AttributeError(f"{type(self).__name__} has no {name!r}; it has: {', '.join(sorted(data))}")

    def __getitem__(self, key):
        return _wrap(self._data[key])

    def __contains__(self, key):
        return key in self._data

    def keys(self):
        return self._data.keys()

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._data))

    def to_dict(self):
        """The JSON object, as the CLI's --json prints it."""
        return json.loads(json.dumps(self._data))

    def to_json(self, indent=None):
        return json.dumps(self._data, indent=indent)

    def __repr__(self):
        text = json.dumps(self._data)
        return f"{type(self).__name__}({text[:200] + '...' if len(text) > 200 else text})"


class Result(Record):
    """What a check found: ``.passed``, ``.first_failure`` ("" when it passed), ``.to_json()``,
    and for the checks that have the gate's reports (check, check_codec, verify_quantize,
    verify_collective) ``.write_reports(dir)``: report.json, report.md, junit.xml, report.html."""

    _report = None

    @property
    def passed(self):
        raise NotImplementedError

    @property
    def first_failure(self):
        raise NotImplementedError

    def write_reports(self, dir):
        if self._report is None:
            raise ValueError(f"{type(self).__name__} has no gate report (the CLI writes none for it either): use .to_json()")
        self._report.write(str(dir))

    def summary(self):
        """The text the CLI prints for the same run."""
        return self._text

    def _raise_if(self, raise_on_failure):
        if raise_on_failure and not self.passed:
            raise CheckFailed(self)
        return self

    def __repr__(self):
        return f"<{type(self).__name__} {'passed' if self.passed else 'FAILED: ' + self.first_failure[:200]}>"


class FormatInfo(Record):
    """One row of `qtransit formats --json`."""

    def __repr__(self):
        return self._data["format"]


class QuantizeResult(Result):
    """`qtransit quantize --json`'s object; codes (input shape), scales, offsets, decoded (input
    shape) as numpy arrays, wire as the packed bytes (codes.bin)."""

    def __init__(self, data, arrays, shape):
        super().__init__(data)
        object.__setattr__(self, "codes", arrays["codes"].reshape(shape))
        object.__setattr__(self, "decoded", arrays["decoded"].reshape(shape))
        object.__setattr__(self, "scales", arrays["scales"])
        object.__setattr__(self, "offsets", arrays["offsets"])
        object.__setattr__(self, "wire", arrays["wire"])
        object.__setattr__(self, "_text", arrays["text"])

    @property
    def passed(self):
        return bool(self._data["bound_holds"] and self._data["matches_reference"])

    @property
    def first_failure(self):
        if not self._data["bound_holds"]:
            return f"error bound violated at element {self._data.get('first_violation', -1)}"
        if not self._data["matches_reference"]:
            return "kernel and reference differ: " + self._data.get("reference_mismatch", "")
        return ""

    @property
    def worst_error(self):
        """The largest |x - decoded| (max_abs_error)."""
        return self._data["max_abs_error"]


class _Reported(Result):
    """A result with the gate's report model behind it (the native Report) and the command's text."""

    def __init__(self, data, report, text):
        super().__init__(data)
        object.__setattr__(self, "_report", report)
        object.__setattr__(self, "_text", text)


class VerifyQuantizeResult(_Reported):
    """`qtransit verify quantize --json`'s object."""

    @property
    def passed(self):
        return bool(self._data["conforms"])

    @property
    def first_failure(self):
        if self.passed:
            return ""
        d = self._data
        if d["conformance"] == "exact" and not d["exact"]:
            return d["first_difference"]
        return d["first_violation"] or d["first_difference"]


class VerifyCollectiveResult(_Reported):
    """`qtransit verify collective --json`'s object."""

    @property
    def passed(self):
        return bool(self._data["holds"])

    @property
    def first_failure(self):
        if self.passed:
            return ""
        d = self._data
        for t in d.get("tiers", []):
            if t.get("tier") == d["asked"] and not t.get("holds", True):
                return f"{d['asked']} violated: {t.get('first', '')}"
        sb = d.get("same_bits", {})
        if sb.get("applies") and not sb.get("holds", True):
            return "the ranks do not hold the same bits: " + sb.get("first", "")
        return f"{d['asked']} does not hold"


class SimulateResult(Result):
    """`qtransit simulate --json`'s object: runs (one per path and N) and fits; outputs (the one
    run's output rows, [N, S] or [N, M]) with keep_outputs=True."""

    def __init__(self, data, outputs, text):
        super().__init__(data)
        object.__setattr__(self, "outputs", outputs)
        object.__setattr__(self, "_text", text)

    @property
    def passed(self):
        return all(r["bound_holds"] and not r.get("k_mismatches") for r in self._data["runs"])

    @property
    def first_failure(self):
        for r in self._data["runs"]:
            if not r["bound_holds"]:
                return f"{r['path']} N={r['ranks']}: bound violated: {r.get('first_violation', '')}"
            if r.get("k_mismatches"):
                return f"{r['path']} N={r['ranks']}: {r['k_mismatches']} (row, contributor) pair(s) with k other than NUMERICS.md section 3 says; first: {r.get('first_k_mismatch', '')}"
        return ""


class GateResult(Result):
    """report.json's object (`qtransit check`): verdicts, runs, and every figure of the report."""

    def __init__(self, report):
        super().__init__(json.loads(report.json()))
        object.__setattr__(self, "_report", report)
        object.__setattr__(self, "_text", report.summary())

    @property
    def passed(self):
        return bool(self._report.passed)

    @property
    def first_failure(self):
        for v in self._data.get("verdicts", []):
            if v.get("status") == "fail":
                return f"{v['name']}: {v.get('message', '')}"
        return ""

    def verdict(self, name):
        """The verdict called `name` (None when the gate drew none by that name)."""
        for v in self._data.get("verdicts", []):
            if v.get("name") == name:
                return Record(v)
        return None


class FormatValidationResult(GateResult):
    """report.json of `qtransit formats validate` (the gate's verdicts, one per property, and
    format_comparison); ``.summary()`` is the command's text, ``.write_reports(dir)`` its files with
    declaration.toml."""


class SurveyResult(Result):
    """`qtransit survey --json`'s object: ``.cases`` (one per format and distribution), ``.failures``;
    ``.summary()`` is the survey.md the command writes."""

    def __init__(self, data, markdown):
        super().__init__(data)
        object.__setattr__(self, "_text", markdown)

    @property
    def passed(self):
        return int(self._data.get("failures", 0)) == 0

    @property
    def first_failure(self):
        for c in self._data.get("cases", []):
            if not c.get("pass", True):
                if c.get("refused"):
                    return f"{c.get('format')} {c.get('dist')}: refused: {c['refused']}"
                if not c.get("matches_reference", True):
                    return f"{c.get('format')} {c.get('dist')}: kernel and reference differ: {c.get('reference_mismatch', '')}"
                return f"{c.get('format')} {c.get('dist')}: an element's error exceeds its bound"
        return ""
