"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``), exactly.

A :class:`Quantity` is what Kubernetes writes as ``cpu: 500m`` or ``memory: 1.5Gi``. This module
parses, compares, adds and prints them the way ``quantity.go`` does, without ever using a float:
the value is held as an exact integer number of nano-units, together with the format
(``DecimalSI``, ``BinarySI`` or ``DecimalExponent``) remembered from parsing.

- ``parse_quantity``: Go's ParseQuantity, the grammar and where Go differs from it.
- ``Quantity``: the value, its arithmetic and comparison; ``Quantity.__str__``: Go's String().
- ``canonical``, ``milli_cpu``, ``bytes_value``: the forms callers most often want.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final, Literal

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "ERR_FORMAT_WRONG",
    "ERR_NUMERIC",
    "ERR_SUFFIX",
    "Format",
    "Quantity",
    "QuantityError",
    "bytes_value",
    "canonical",
    "milli_cpu",
    "parse_quantity",
]

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

DECIMAL_SI: Final = "DecimalSI"
BINARY_SI: Final = "BinarySI"
DECIMAL_EXPONENT: Final = "DecimalExponent"
_FORMATS: Final = frozenset((DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT))

# Kubernetes' own error texts (quantity.go: ErrFormatWrong, ErrNumeric, ErrSuffix).
ERR_FORMAT_WRONG: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
ERR_NUMERIC: Final = "unable to parse numeric part of quantity"
ERR_SUFFIX: Final = "unable to parse quantity's suffix"

_NANO: Final = 10**9
_MICRO_IN_NANOS: Final = 10**6
_MAX_INT64: Final = 2**63 - 1
_MAX_BINARY_NANOS: Final = _MAX_INT64 * _NANO  # BinarySI input is capped at 2^63-1
_BINARY_DECIMAL_BOUND: Final = 1024 * _NANO  # |v| < 1024 prints as DecimalSI
_MAX_INT32: Final = 2**31 - 1
_MAX_DIGITS: Final = 1000  # a parsed decimal value must be below 10**_MAX_DIGITS
_TOO_LARGE: Final = f"quantity is too large: its magnitude must be below 1e{_MAX_DIGITS}"

# Go's parseQuantityString as one expression: sign, leading zeros, numerator, optional
# "." and denominator, then the suffix (letters, optional sign, digits). A string this does
# not fully match is exactly one Go's scanner rejects with ErrFormatWrong.
_SCAN: Final = re.compile(r"([+-]?)(0*)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)")
_EXPONENT: Final = re.compile(r"[+-]?[0-9]+")

# suffix -> (base, exponent, format); suffix.go's tables.
_SUFFIXES: Final[dict[str, tuple[int, int, str]]] = {
    "": (10, 0, DECIMAL_SI),
    "n": (10, -9, DECIMAL_SI),
    "u": (10, -6, DECIMAL_SI),
    "m": (10, -3, DECIMAL_SI),
    "k": (10, 3, DECIMAL_SI),
    "M": (10, 6, DECIMAL_SI),
    "G": (10, 9, DECIMAL_SI),
    "T": (10, 12, DECIMAL_SI),
    "P": (10, 15, DECIMAL_SI),
    "E": (10, 18, DECIMAL_SI),
    "Ki": (2, 10, BINARY_SI),
    "Mi": (2, 20, BINARY_SI),
    "Gi": (2, 30, BINARY_SI),
    "Ti": (2, 40, BINARY_SI),
    "Pi": (2, 50, BINARY_SI),
    "Ei": (2, 60, BINARY_SI),
}
_DECIMAL_SI_SUFFIX: Final[dict[int, str]] = {
    -9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E",
}
_BINARY_SI_SUFFIX: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")  # index: power of 1024


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity; the message is Kubernetes' own error text."""


class Quantity:
    """An immutable, exact Kubernetes quantity: an integer number of nano-units plus a format.

    Equality, ordering and hashing use the exact value only, so ``1`` == ``1000m`` and
    ``1Ki`` == ``1024``; the format only decides how the value prints. Python integers do not
    overflow, so ``value()``/``milli_value()`` are exact where Go's int64 accessors would saturate
    or wrap, and sums beyond int64 stay exact.
    """

    __slots__ = ("_nanos", "_format", "_s")

    _nanos: int
    _format: str
    _s: str | None

    def __new__(cls, value: str | int | Quantity = 0) -> Quantity:
        """``Quantity("500m")`` is ``parse_quantity("500m")``."""
        return parse_quantity(value)

    # ------------------------------------------------------------ constructors

    @classmethod
    def from_nanos(cls, nanos: int, fmt: str = DECIMAL_SI) -> Quantity:
        """The quantity ``nanos`` * 10^-9 in format ``fmt``."""
        return _make(_check_int(nanos), _check_format(fmt))

    @classmethod
    def from_milli(cls, m: int, fmt: str = DECIMAL_SI) -> Quantity:
        """The quantity ``m`` * 10^-3 (Go's NewMilliQuantity)."""
        return _make(_check_int(m) * _MICRO_IN_NANOS, _check_format(fmt))

    @classmethod
    def from_int(cls, v: int, fmt: str = DECIMAL_SI) -> Quantity:
        """The quantity ``v`` (Go's NewQuantity)."""
        return _make(_check_int(v) * _NANO, _check_format(fmt))

    # ------------------------------------------------------------ accessors

    @property
    def nanos(self) -> int:
        """The exact value in nano-units."""
        return self._nanos

    @property
    def format(self) -> str:
        """``DecimalSI``, ``BinarySI`` or ``DecimalExponent``."""
        return self._format

    def value(self) -> int:
        """Go's Value(): the value rounded to an integer, away from zero (``1500m`` is 2)."""
        return _div_away(self._nanos, _NANO)

    def milli_value(self) -> int:
        """Go's MilliValue(): the value in milli-units, rounded away from zero."""
        return _div_away(self._nanos, _MICRO_IN_NANOS)

    def is_zero(self) -> bool:
        return self._nanos == 0

    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self._nanos > 0) - (self._nanos < 0)

    # ------------------------------------------------------------ arithmetic

    def __add__(self, other: object) -> Quantity:
        """Go's Add: the left operand's format, or the right one's if the left is zero."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self._nanos == 0 else self._format
        return _make(self._nanos + other._nanos, fmt)

    def __sub__(self, other: object) -> Quantity:
        """Go's Sub: the left operand's format, or the right one's if the left is zero."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self._nanos == 0 else self._format
        return _make(self._nanos - other._nanos, fmt)

    def __neg__(self) -> Quantity:
        return _make(-self._nanos, self._format)

    def __pos__(self) -> Quantity:
        return self

    # ------------------------------------------------------------ comparison

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos == other._nanos

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos != other._nanos

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos < other._nanos

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos <= other._nanos

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos > other._nanos

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos >= other._nanos

    def __hash__(self) -> int:
        return hash(self._nanos)

    # ------------------------------------------------------------ text

    def __str__(self) -> str:
        """Go's String(): the kept input text if Go kept it, else the canonical form.

        When the input was already in a form Go recognises as canonical on its fast path, the input
        text itself is kept (``+1`` prints ``+1``, ``1.Ki`` prints ``1.Ki``); otherwise the canonical
        form is computed (``1.5`` prints ``1500m``, ``1.5Gi`` prints ``1536Mi``, ``1000`` prints
        ``1k``). Values with no SI suffix large enough print in exponent form (``1000E`` prints
        ``1e21``, a ``BinarySI`` 2^70 prints its decimal digits), as merged upstream in
        kubernetes#140459.
        """
        s = self._s
        if s is None:
            s = _canonical_text(self._nanos, self._format)
            _set_s(self, s)
        return s

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self._format})"

    # ------------------------------------------------------------ immutability

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Quantity is immutable")

    def __copy__(self) -> Quantity:
        return self

    def __deepcopy__(self, memo: object) -> Quantity:
        return self

    def __reduce__(self) -> tuple[object, tuple[int, str, str | None]]:
        return (_restore, (self._nanos, self._format, self._s))


# Slot setters bypass Quantity.__setattr__; only this module builds quantities.
_set_nanos = Quantity.__dict__["_nanos"].__set__
_set_format = Quantity.__dict__["_format"].__set__
_set_s = Quantity.__dict__["_s"].__set__
_new_object = object.__new__


def _make(nanos: int, fmt: str, s: str | None = None) -> Quantity:
    q = _new_object(Quantity)
    _set_nanos(q, nanos)
    _set_format(q, fmt)
    _set_s(q, s)
    return q


def _restore(nanos: int, fmt: str, s: str | None) -> Quantity:
    return _make(nanos, fmt, s)


def _check_int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an int, got {type(v).__name__}")
    return int(v)


def _check_format(fmt: object) -> str:
    if fmt not in _FORMATS:
        raise QuantityError(f"unknown quantity format {fmt!r}")
    return fmt


def _div_away(n: int, d: int) -> int:
    """n / d rounded away from zero (Go's ScaledValue on the int64 path)."""
    q, r = divmod(-n if n < 0 else n, d)
    if r:
        q += 1
    return -q if n < 0 else q


# ---------------------------------------------------------------- parsing


def parse_quantity(s: str | int | Quantity) -> Quantity:
    """Go's ParseQuantity. An int is a plain number (JSON ``cpu: 2``); a Quantity is returned as is.

    Raises QuantityError (a ValueError) with Kubernetes' error text for a malformed string.

    Grammar (as Kubernetes documents it)::

        <quantity>        ::= <signedNumber><suffix>
        <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
        <signedNumber>    ::= <number> | "+"<number> | "-"<number>
        <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
        <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
        <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
        <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

    Behaviour follows Go's ``ParseQuantity`` and ``Quantity.String`` (``Quantity.__str__``) rather
    than the grammar where the two differ, because that is what an API server accepts and prints:

    - values finer than 1n are rounded up, away from zero (``0.1n`` is ``1n``);
    - ``BinarySI`` input is capped at 2^63-1 (``8Ei`` parses as ``9223372036854775807``), and a
      ``BinarySI`` value strictly between 0 and 1 is remembered as ``DecimalSI``;
    - Go's scanner accepts a number without digits when its int64 fast path handles it (``Ki``,
      ``m``, ``.`` and ``-`` parse as zero) and rejects it otherwise (``Ei``, ``e-10``).

    To keep a hostile string from allocating a gigantic integer, a parsed decimal value must be
    below 10^1000 in magnitude (Go has no such bound) and a decimal exponent must fit an int32, as
    upstream now requires.
    """
    if isinstance(s, str):
        return _parse_str(s)
    if isinstance(s, Quantity):
        return s
    if isinstance(s, int) and not isinstance(s, bool):
        if s.bit_length() > 3 * _MAX_DIGITS + 400:  # certainly >= 10**_MAX_DIGITS
            raise QuantityError(_TOO_LARGE)
        return _parse_str(str(s))
    raise TypeError(f"a quantity must be a str or an int, got {type(s).__name__}")


@lru_cache(maxsize=4096)
def _parse_str(s: str) -> Quantity:
    if not s:
        raise QuantityError(ERR_FORMAT_WRONG)
    if s == "0":
        return _make(0, DECIMAL_SI, "0")
    m = _SCAN.fullmatch(s)
    if m is None:
        raise QuantityError(ERR_FORMAT_WRONG)
    sign, zeros, num, denom, suffix = m.groups()
    if denom is None:
        denom = ""
    if not num:
        num = "0"
    interpreted = _interpret(suffix)
    if interpreted is None:
        raise QuantityError(ERR_SUFFIX)
    base, exponent, fmt = interpreted

    # Go's int64 fast path: which inputs take it decides whether the input text is kept as
    # the printed form, and whether a number without digits is zero or ErrNumeric.
    if fmt == BINARY_SI:
        if denom:
            precision = -1
        else:
            precision = 15 - len(num) - exponent * 3 // 10 - 1
        scale = 0
    else:
        precision = 18 - (len(num) + len(denom))
        scale = exponent
    kept: str | None = None
    if precision >= 0 and scale - len(denom) >= -9:
        shifted = num + denom
        scale -= len(denom)
        if fmt == BINARY_SI:
            if int(shifted) & 0x07:
                kept = s
        elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
            kept = s
    elif not (zeros or m.group(3) or denom):
        raise QuantityError(ERR_NUMERIC)  # Go's inf.Dec finds no digits

    magnitude = _magnitude_nanos(num + denom, len(denom), base, exponent)
    if fmt == BINARY_SI:
        if magnitude > _MAX_BINARY_NANOS:
            magnitude = _MAX_BINARY_NANOS
        if 0 < magnitude < _NANO:
            fmt = DECIMAL_SI
    return _make(-magnitude if sign == "-" else magnitude, fmt, kept)


def _interpret(suffix: str) -> tuple[int, int, str] | None:
    """suffix.go's interpret: (base, exponent, format), or None for an unknown suffix."""
    known = _SUFFIXES.get(suffix)
    if known is not None:
        return known
    if len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix, 1):
        digits = suffix[1:].lstrip("+-").lstrip("0")
        if len(digits) <= 10:
            exponent = int(suffix[1:])
            # Upstream rejects exponents outside int32 rather than truncating them.
            if -_MAX_INT32 <= exponent <= _MAX_INT32:
                return (10, exponent, DECIMAL_EXPONENT)
    return None


def _magnitude_nanos(digits: str, fraction_len: int, base: int, exponent: int) -> int:
    """|value| in nano-units, rounded up, for the digit string ``digits`` with
    ``fraction_len`` fractional digits, times base**exponent.

    Only a bounded prefix of the digits is ever converted to an int (at most about
    _MAX_DIGITS + 9 digits), so arbitrarily long inputs stay cheap and within Python's
    int/str conversion limit.
    """
    significant = digits.lstrip("0")
    if not significant:
        return 0
    stripped = significant.rstrip("0")
    k = len(stripped)
    # nanos = int(stripped) * 10**e10 * 2**e2, exactly
    e10 = (exponent if base == 10 else 0) - fraction_len + (len(significant) - k) + 9
    e2 = exponent if base == 2 else 0
    if e2:
        if k + e10 >= 29:  # >= 10**19 units before the 2**e2 factor: past the BinarySI cap
            return _MAX_BINARY_NANOS + 1
    elif k + e10 - 9 > _MAX_DIGITS:
        raise QuantityError(_TOO_LARGE)
    if e10 >= 0:
        scale: int = 10**e10  # an int: a non-negative power
        return (int(stripped) * scale) << e2
    s = -e10
    if s >= e2:
        # value = D / (10**(s-e2) * 5**e2): cut the decimal digits off first, keep a sticky
        # bit for any nonzero digit dropped, then divide by 5**e2 rounding up.
        cut = k - (s - e2)
        if cut <= 0:
            return 1
        head = int(stripped[:cut])
        five_e2: int = 5**e2  # an int: a non-negative power
        q, r = divmod(head, five_e2)
        return q + 1 if (r or cut < k) else q
    # s < e2 < 61 and k + e10 < 29: small numbers, exact division
    five_s: int = 5**s  # an int: a non-negative power
    q, r = divmod(int(stripped) << (e2 - s), five_s)
    return q + 1 if r else q


# ---------------------------------------------------------------- printing


def _canonical_text(nanos: int, fmt: str) -> str:
    """Go's CanonicalizeBytes: the largest suffix that loses no precision and needs no fraction."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    mantissa = -nanos if nanos < 0 else nanos
    if fmt == BINARY_SI:
        if mantissa < _BINARY_DECIMAL_BOUND or mantissa % _NANO:
            fmt = DECIMAL_SI  # small or fractional: shown in decimal, never rounded
        else:
            units = mantissa // _NANO
            power = 0
            while units % 1024 == 0:
                units >>= 10
                power += 1
            if power < len(_BINARY_SI_SUFFIX):
                return f"{sign}{units}{_BINARY_SI_SUFFIX[power]}"
            fmt = DECIMAL_EXPONENT  # past Ei: exact decimal instead (kubernetes#140459)
    exponent = -9
    while mantissa % _NANO == 0:
        mantissa //= _NANO
        exponent += 9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    rest = exponent % 3
    if rest == 1:
        mantissa *= 10
        exponent -= 1
    elif rest == 2:
        mantissa *= 100
        exponent -= 2
    if fmt == DECIMAL_SI:
        suffix = _DECIMAL_SI_SUFFIX.get(exponent)
        if suffix is not None:
            return f"{sign}{mantissa}{suffix}"
        # past E: exponent form instead of dropping the magnitude (kubernetes#140459)
    if exponent == 0:
        return f"{sign}{mantissa}"
    return f"{sign}{mantissa}e{exponent}"


# ---------------------------------------------------------------- helpers


def canonical(s: str | int) -> str:
    """The form Kubernetes prints for ``s``: ``str(parse_quantity(s))``."""
    return str(parse_quantity(s))


def milli_cpu(s: str | int) -> int:
    """CPU in millicores: ``parse_quantity(s).milli_value()`` (``"1.5"`` is 1500)."""
    return parse_quantity(s).milli_value()


def bytes_value(s: str | int) -> int:
    """A byte count: ``parse_quantity(s).value()`` (``"1Ki"`` is 1024)."""
    return parse_quantity(s).value()
