"""The pattern detectors of `--redact`: each finds the spans of one kind of identifier in a text,
a candidate by a regular expression, kept only when it validates (a checksum, a phone number
the `phonenumbers` library calls valid for a region, an address `ipaddress` parses).

The check digits are python-stdnum's (Luhn, IBAN's mod 97, CPF, CNPJ, INN, SSN's reserved
ranges), not written here; SNILS, which python-stdnum 2.2 lacks, is checked by `snils_valid`. A
number its label names is taken without them (`LABELLED`); credentials are `credentials`' shapes.
Names and street addresses need a named-entity model and are not found here (docs/privacy.md)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from flowrate.inputs.redaction import credentials


@dataclass(frozen=True)
class Span:
    """A found identifier: `text[start:end]`, of `kind` (the placeholder's type, "EMAIL"), and
    `key`, what makes two mentions the same identifier (an email in lower case, a number's digits)."""

    start: int
    end: int
    kind: str
    key: str


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _whole(value: str) -> list[int]:
    return [len(value)]


def _heads(value: str) -> list[int]:
    """The ends of `value`'s heads at its spaces, the longest first: a spaced IBAN may run into the
    words after it ("de89 3704 0044 0532 0130 00 is mine"), which a lowercase one can be read with."""
    return [len(value), *(at for at in range(len(value) - 1, 0, -1) if value[at] == " ")]


_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])")
# a URL whose query or fragment names a secret: the whole URL is replaced
_SECRET_NAMES = (
    "token|access_token|refresh_token|id_token|auth|authorization|key|api_key|apikey|api-key|secret|client_secret"
    "|password|passwd|pwd|sig|signature|x-amz-signature|x-amz-credential|session|sessionid|session_id|sid|code|otp"
)
_SECRET_URL = re.compile(
    rf"\b(?:https?|wss?|ftp)://[^\s<>\"']*?[?&#](?:{_SECRET_NAMES})=[^\s<>\"']*[^\s<>\"'.,;:!?)\]]", re.IGNORECASE
)  # a sentence's full stop after the URL is not part of it
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b", re.IGNORECASE)
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_CNPJ = re.compile(r"(?<![\d./-])\d{2}\.?\d{3}\.?\d{3}/?\d{4}-?\d{2}(?![\d-])")
_CPF = re.compile(r"(?<![\d./-])\d{3}\.?\d{3}\.?\d{3}-\d{2}(?![\d-])")
# 11 bare digits pass a CPF's two check digits one time in a hundred: read after the phone numbers
_CPF_BARE = re.compile(r"(?<![\d./-])\d{11}(?![\d-])")
_SNILS = re.compile(r"(?<![\d-])\d{3}-\d{3}-\d{3}[ -]\d{2}(?![\d-])")
_INN_12 = re.compile(r"(?<![\d-])\d{12}(?![\d-])")
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")

# A number its label names (SSN 078-05-1120) is that identifier whatever its check digits say: the
# check keeps unlabelled numbers that merely look like one out, not a labelled one with a typo in.
_TO_VALUE = r"[\s:#№.,=-]{0,4}(?:(?:is|é|number|no\.?|n[º°o]\.?|número|numero|номер|on\s+file)[\s:#№.,=-]{0,4}){0,3}"


def _labelled(label: str, value: str) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{label})\b{_TO_VALUE}(?P<value>(?<![\w.-])(?:{value}))(?![\w-]|[.,/]\d)", re.IGNORECASE)


LABELLED = {
    "SSN": _labelled(r"SSN|social\s+security(?:\s+number)?", r"\d{3}(?P<sep>[ -]?)\d{2}(?P=sep)\d{4}"),
    "CPF": _labelled("CPF", r"\d{3}\.?\d{3}\.?\d{3}[-.]?\d{2}"),
    "CNPJ": _labelled("CNPJ", r"\d{2}\.?\d{3}\.?\d{3}/?\d{4}-?\d{2}"),
    "INN": _labelled("INN|ИНН", r"\d{12}|\d{10}"),
    "SNILS": _labelled("SNILS|СНИЛС", r"\d{3}(?P<sep>[ -]?)\d{3}(?P=sep)\d{3}[ -]?\d{2}"),
    "IBAN": _labelled("IBAN", r"(?-i:[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})"),  # in capitals: not into the words after
    "CARD": _labelled(
        r"card|credit\s+card|debit\s+card|cart[ãa]o(?:\s+de\s+cr[ée]dito)?|карт[аыуео]й?|кредитк[аиу]",
        r"\d(?:[ -]?\d){12,18}",
    ),
}
# Words after which a number is an order's, an invoice's, a ticket's: not a phone, a CPF or an INN.
_REFERENCE_BEFORE = re.compile(
    r"\b(?:order|invoice|reference|ref|ticket|tracking|case|booking|confirmation|receipt|transaction|shipment"
    r"|pedido|fatura|nota\s+fiscal|protocolo|refer[êe]ncia|rastreio|rastreamento|chamado|boleto"
    r"|заказ[аеу]?|сч[её]т[аеу]?|накладн\w*|трек|заявк[аиеу]|обращени[ея])"
    r"(?:\s+(?:number|no\.?|num\.?|n[º°o]\.?|id|code|número|numero|номер|код))?\s*[:#№]?\s*(?:is\s+|é\s+)?$",
    re.IGNORECASE,
)
_VERSION_BEFORE = re.compile(r"\b(?:version|ver\.?|v|build|release|versão|versao|версия|версии)\s*$", re.IGNORECASE)
# "19.1.96.0 is the newest version": a version named after the number
_VERSION_AFTER = re.compile(
    r"[\s,)]*(?:is|was|é|—|-)?\s*(?:(?:the|a|an|our|a|o|uma?)\s+)?(?:[\w-]+\s+)?"
    r"(?:version|release|build|update|versão|versao|atualização|версия|сборка|обновление)\b",
    re.IGNORECASE,
)
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\d|\.\d)")  # a sentence's full stop may follow
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
    "|janeiro|fevereiro|março|marco|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro"
    "|января|февраля|марта|апреля|мая|июня|июля|августа|сентября|октября|ноября|декабря"
)
_DATE = (
    r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:de\s+)?(?:{_MONTHS})\.?,?\s+(?:de\s+)?\d{{4}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
)
_DOB_LABEL = (
    r"date\s+of\s+birth|birth\s*date|d\.?o\.?b\.?|born(?:\s+on)?|birthday"
    r"|data\s+de\s+nascimento|nascid[oa]\s+em|nasci\s+em"
    r"|дата\s+рождения|родил(?:ся|ась)|д\.\s*р\."
)
_DOB = re.compile(rf"(?:{_DOB_LABEL})\W{{0,4}}(?:is\s+|é\s+|em\s+|on\s+)?(?P<value>{_DATE})", re.IGNORECASE)


def snils_valid(number: str) -> bool:
    """True when the 11 digits of `number` are a Russian SNILS: the control number (the last two
    digits) is the sum of the first nine, each times 9 down to 1, modulo 101 (100 and 101 are 00).
    The numbers up to 001-001-998 were issued before the check existed and are not taken."""
    digits = _digits(number)
    if len(digits) != 11 or int(digits[:9]) <= 1001998:
        return False
    total = sum(int(digit) * weight for digit, weight in zip(digits[:9], range(9, 0, -1)))
    return total % 101 % 100 == int(digits[9:])


def _ip_valid(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address.version == 4 or len(re.findall(r"[0-9A-Fa-f]+", text)) >= 2  # not a bare "::"


def _card_valid(text: str) -> bool:
    from stdnum import luhn

    digits = _digits(text)
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn.is_valid(digits)


def _stdnum(module: str) -> Callable[[str], bool]:
    def valid(text: str) -> bool:
        import importlib

        checker: Any = importlib.import_module(f"stdnum.{module}")
        return bool(checker.is_valid(text))

    return valid


def _lower(text: str) -> str:
    return text.lower()


def _compact(text: str) -> str:
    return re.sub(r"\s", "", text).upper()


@dataclass(frozen=True)
class PatternDetector:
    """One kind of identifier found by `pattern` and kept when `valid`; `key` makes its identity."""

    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool]
    key: Callable[[str], str] = _digits
    unless: re.Pattern[str] | None = None  #: a match is not taken when the 30 characters before it match this
    unless_after: re.Pattern[str] | None = None  #: nor when the 40 characters after it match this
    heads: Callable[[str], list[int]] = _whole  #: where a match may end, the longest first
    keywords: tuple[str, ...] = ()  #: when given, a text holding none of these is not searched

    def spans(self, text: str) -> Iterator[Span]:
        """The valid matches of the pattern (its `value` group where it has one), each the longest
        of its valid heads."""
        if self.keywords and not any(keyword in text for keyword in self.keywords):
            return
        for match in self.pattern.finditer(text):
            named = "value" in self.pattern.groupindex
            value, start = (match.group("value"), match.start("value")) if named else (match.group(0), match.start())
            end = next((end for end in self.heads(value) if self.valid(value[:end])), None)
            if end is not None:
                yield Span(start, start + end, self.kind, self.key(value[:end]))

    def find(self, text: str) -> Iterator[Span]:
        """The spans of `text` this detector finds."""
        for span in self.spans(text):
            if self.unless is not None and self.unless.search(text[max(0, span.start - 30) : span.start]):
                continue
            if self.unless_after is None or not self.unless_after.match(text[span.end : span.end + 40]):
                yield span


def _always(_: str) -> bool:
    return True


# In order of precedence: a span overlapping one found by an earlier detector is not taken.
PATTERN_DETECTORS: tuple[PatternDetector, ...] = (
    PatternDetector("URL", _SECRET_URL, _always, str),
    PatternDetector("SECRET", credentials.URL_PASSWORD, _always, str, keywords=("://",)),
    PatternDetector("SECRET", credentials.TOKENS, _always, str, keywords=credentials.TOKEN_KEYWORDS),
    PatternDetector("SECRET", credentials.AWS_SECRET, _always, str),
    PatternDetector("SECRET", credentials.QUOTED_SECRET, _always, str),
    PatternDetector("SECRET", credentials.PIN, _always, str),
    PatternDetector("SECRET", credentials.PASSWORD, credentials.password_shaped, str),
    PatternDetector("SECRET", credentials.LABELLED_KEY, credentials.key_shaped, str),
    PatternDetector("EMAIL", _EMAIL, _always, _lower),
    PatternDetector("IBAN", _IBAN, _stdnum("iban"), _compact, heads=_heads),
    PatternDetector("DOB", _DOB, _always, _lower),
    PatternDetector("CNPJ", _CNPJ, _stdnum("br.cnpj"), unless=_REFERENCE_BEFORE),
    PatternDetector("SNILS", _SNILS, snils_valid),
    PatternDetector("CPF", _CPF, _stdnum("br.cpf"), unless=_REFERENCE_BEFORE),
    PatternDetector("SSN", _SSN, _stdnum("us.ssn")),
    PatternDetector("INN", _INN_12, _stdnum("ru.inn"), unless=_REFERENCE_BEFORE),
    PatternDetector("CARD", _CARD, _card_valid),
    *(
        PatternDetector(kind, pattern, _always, _compact if kind == "IBAN" else _digits)
        for kind, pattern in LABELLED.items()
    ),
    PatternDetector("IP", _IPV4, _ip_valid, str, _VERSION_BEFORE, _VERSION_AFTER),
    PatternDetector("IP", _IPV6, _ip_valid, _lower),
)
# What is taken only where no phone number was read (a UK number, 01223575314, may have a CPF's check digits).
AFTER_PHONES: tuple[PatternDetector, ...] = (
    PatternDetector("CPF", _CPF_BARE, _stdnum("br.cpf"), unless=_REFERENCE_BEFORE),
)
# what libphonenumber reads as a valid number but is not one: a version (6.3.960017031), a date and
# time (2016-01-03 15, 2024.03.15 14), a URL's path segment (weibo.com/1434968493/)
_NOT_A_PHONE = re.compile(r"(?:^|\.)\d\.|\b(?:19|20)\d\d([-./])\d\d\1\d\d\b|\b\d\d([-./])\d\d\2(?:19|20)\d\d\b")
_DOTTED = re.compile(r"[\d.]*")
_DOTTED_QUAD = re.compile(r"\.?\d{1,3}(?:\.\d{1,3}){3,}\.?")  # an IP address or a version, 192.168.10.24
# a code's letters and a hyphen before a number (INV-2024-000123, ORD-4155552671): the number is the code's
_CODE_BEFORE = re.compile(r"[^\W\d_]{2,}-$")
_PHONE_DIGITS = re.compile(r"\d(?:[\s().-]{0,3}\d){6}")  # seven digits near each other: a phone may be there


def _not_a_phone(text: str, start: int, end: int) -> bool:
    """True when the number read at `text[start:end]` is a date, a version, an IP address, a URL's
    path segment, the number of an order, an invoice or a ticket ("Order 1234567890 shipped") or a
    code's (INV-2024-000123)."""
    raw = text[start:end]
    if (
        _NOT_A_PHONE.search(raw)
        or text[start - 1 : start] == "/"
        or _CODE_BEFORE.search(text[max(0, start - 20) : start])
    ):
        return True
    before = _DOTTED.match(text[:start][::-1])
    after = _DOTTED.match(text, end)
    around = text[start - len(before.group(0) if before else "") : after.end() if after else end]
    if _DOTTED_QUAD.fullmatch(around):
        return True
    return bool(_REFERENCE_BEFORE.search(text[max(0, start - 30) : start]))


def find_phones(text: str, regions: Sequence[str]) -> Iterator[Span]:
    """The phone numbers of `text` that the `phonenumbers` library finds valid, read as numbers of
    each of `regions` in turn (ISO 3166 codes, "US", "BR", "RU"); a number written with its `+`
    country code is found whatever the region. The key is the number in E.164 form."""
    if not _PHONE_DIGITS.search(text):
        return
    import phonenumbers

    for region in regions:
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            if _not_a_phone(text, match.start, match.end):
                continue
            number = phonenumbers.format_number(match.number, phonenumbers.PhoneNumberFormat.E164)
            yield Span(match.start, match.end, "PHONE", number)


def detector_versions() -> str:
    """The detectors' identity a row records: the pattern set's version and the libraries'."""
    import phonenumbers
    import stdnum

    return f"flowrate-patterns 2; phonenumbers {phonenumbers.__version__}; python-stdnum {stdnum.__version__}"
