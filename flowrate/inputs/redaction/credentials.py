"""The credentials `--redact` replaces by `<SECRET_n>`: API keys and tokens by the shapes their
issuers give them, and a password, key or token a text labels as one.

The shapes are gitleaks' rules (config/gitleaks.toml, v8, July 2026) and detect-secrets' plugins
(1.5.0, detect_secrets/plugins/), ported rather than depended on: detect-secrets scans lines and
reports the secret's value, not where it is, and its keyword and entropy plugins are made for
source code (`key = value`), where a chat's prose would be taken for secrets; gitleaks is a Go
program. Where a rule fixes a key's exact length, it is loosened to a minimum: a key pasted into a
support chat is often cut, and the issuer's prefix alone (`sk-ant-`, `ghp_`) is what marks it.
Each pattern's source is named beside it."""

from __future__ import annotations

import re

# Characters around a token: a key is not taken from inside a longer word.
_START = r"(?<![\w-])"
_END = r"(?![\w-])"

# The issuers' shapes, each whole match a secret.
TOKEN_SHAPES: tuple[str, ...] = (
    # gitleaks anthropic-api-key, anthropic-admin-api-key (sk-ant-api03-, 93 characters and AA)
    rf"{_START}sk-ant-[A-Za-z0-9]{{2,8}}\d\d-[A-Za-z0-9_-]{{16,}}",
    # gitleaks openai-api-key (sk-proj-, sk-svcacct-, sk-admin-, T3BlbkFJ in the middle); detect-secrets openai.py
    rf"{_START}sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{{16,}}",
    rf"{_START}sk-[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]{{16,}}",
    # gitleaks stripe-access-token; detect-secrets stripe.py
    rf"{_START}(?:sk|rk|pk)_(?:test|live|prod)_[A-Za-z0-9]{{10,99}}{_END}",
    # gitleaks aws-access-token; detect-secrets aws.py (the access key id)
    r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    # gitleaks github-pat, github-oauth, github-app-token, github-refresh-token; detect-secrets github_token.py
    rf"{_START}(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{{20,}}{_END}",
    rf"{_START}github_pat_\w{{22,}}",
    # gitleaks gitlab-pat and the other glxx- tokens; detect-secrets gitlab_token.py
    rf"{_START}(?:glpat|gldt|glft|glsoat|glrt|glcbt|glptt|glimt)-[\w-]{{20,}}",
    # detect-secrets slack.py (xoxa-, xoxb-, xoxp-, xoxo-, xoxs-, xoxr-), gitleaks slack-*-token and slack-app-token
    r"\bxox[abposre]-(?:\d+-)+[A-Za-z0-9-]+",
    r"\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+",
    # detect-secrets slack.py, gitleaks slack-webhook-url
    r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
    # gitleaks jwt, detect-secrets jwt.py: a header and a payload that are base64 JSON objects, '{"' is "eyJ"
    r"\beyJ[A-Za-z0-9]{14,}\.ey[A-Za-z0-9/\\_-]{17,}\.(?:[A-Za-z0-9/\\_-]{10,}={0,2})?",
    # gitleaks gcp-api-key
    rf"{_START}AIza[\w-]{{35}}{_END}",
    # gitleaks huggingface-access-token, huggingface-organization-api-token
    rf"{_START}(?:hf|api_org)_[A-Za-z]{{34}}{_END}",
    # gitleaks npm-access-token; detect-secrets pypi_token.py; gitleaks sendgrid-api-token, detect-secrets sendgrid.py
    rf"{_START}npm_[A-Za-z0-9]{{36}}{_END}",
    rf"{_START}pypi-AgE[A-Za-z0-9_-]{{50,}}",
    rf"{_START}SG\.[\w-]{{22}}\.[\w-]{{43}}{_END}",
    # detect-secrets telegram_token.py; gitleaks twilio-api-key
    r"(?<![\d:])\d{8,10}:AA[\w-]{33}(?![\w-])",
    rf"{_START}SK[0-9a-fA-F]{{32}}{_END}",
    # gitleaks private-key; detect-secrets private_key.py (the whole block)
    r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
)

TOKENS = re.compile("|".join(f"(?:{shape})" for shape in TOKEN_SHAPES))
# What a text holds when a shape may match (as gitleaks' keywords): a text with none is not searched,
# which takes the shapes from 0.33 to 0.06 ms of CPU per conversation over bench/redaction.py's 8,220 dialogues
TOKEN_KEYWORDS = (
    *("sk-", "sk_", "rk_", "pk_", "A3T", "AKIA", "ASIA", "ABIA", "ACCA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    *("github_pat_", "glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glptt-", "glimt-", "xox", "xapp-"),
    *("hooks.slack.com", "eyJ", "AIza", "hf_", "api_org_", "npm_", "pypi-", "SG.", ":AA", "SK", "PRIVATE KEY"),
)

# A label, then what it labels (the value group): a password, a PIN, a key or token named as one.
_IS = r"(?:\s+(?:is|was|é|era|—|->)(?:\s+now)?\s*[:=]?\s*|\s*[:=]\s*|\s+)"  # "is", ":", "=" or a space
# A label may be joined to a prefix by "_" (DB_PASSWORD=, STRIPE_SECRET=, as .env files write them)
# and closed by a quote before its ":" ("password": "...", as JSON writes it), as detect-secrets'
# keyword plugin reads them
_JOINED = r"(?<![\w/.-])(?:[A-Za-z0-9]+_)*"
_CLOSED = r"(?:[\"'](?=\s*[:=]))?"
_PASSWORD_LABEL = (
    rf"{_JOINED}(?:password|passwd|passphrase|passcode|senha|пароль)\b{_CLOSED}"  # not pwd, the shell command
)
_KEY_LABEL = (
    rf"{_JOINED}(?:api[\s_-]?key|secret(?:[\s_-]?(?:access[\s_-]?)?key)?|access[\s_-]?token|auth[\s_-]?token|token"
    r"|client[\s_-]?secret|bearer|chave(?:\s+de\s+api)?|ключ(?:\s+api)?|токен)\b" + _CLOSED
)
# detect-secrets basic_auth.py: the password of a URL's credentials (scheme://user:password@host),
# the user and the host kept; a text without "://" is not searched
URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/@:{}]*:(?P<value>[^\s/@{}]+)@", re.IGNORECASE)
# detect-secrets aws.py: a secret access key is 40 characters of base64 near "aws" and a key word
AWS_SECRET = re.compile(
    r"(?<![A-Za-z])(?:aws|secret[\s_-]?access[\s_-]?key)[^\n]{0,30}?(?<![A-Za-z0-9/+])(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    re.IGNORECASE,
)
QUOTED_SECRET = re.compile(
    rf"(?:{_PASSWORD_LABEL}|{_KEY_LABEL}){_IS}(?P<quote>[\"'“«`])(?P<value>[^\"'”»`\n]+)(?P=quote)?", re.IGNORECASE
)
# a PIN is digits: "ZHOU Pin @Quwan.com" names a person
PIN = re.compile(rf"(?<![\w/.-])(?:pin(?:[\s-]?code)?|пин-?код){_IS}(?P<value>\d{{4,8}})(?!\d)", re.IGNORECASE)
PASSWORD = re.compile(rf"{_PASSWORD_LABEL}{_IS}(?P<value>[^\s\"'“«`]+?)(?=[.,;:!?)\]]*(?:\s|$))", re.IGNORECASE)
# gitleaks generic-api-key, for prose: a labelled value of 12 or more token characters
LABELLED_KEY = re.compile(
    rf"{_KEY_LABEL}{_IS}(?P<value>[A-Za-z0-9_\-./+=]{{12,}}?)(?=[.,;:!?)\]]*(?:\s|$))", re.IGNORECASE
)


def password_shaped(value: str) -> bool:
    """True when `value`, written after a password's label without quotes, looks like a password
    rather than a word of the sentence ("my password is wrong"): it has a digit, a sign, or a
    capital letter after its first character."""
    return any(char.isdigit() or not char.isalnum() for char in value) or any(char.isupper() for char in value[1:])


def key_shaped(value: str) -> bool:
    """True when `value`, after a key's or token's label, mixes letters and digits as generated
    keys do ("token abc123def456ghi"), not a word ("token authentication")."""
    return any(char.isdigit() for char in value) and any(char.isalpha() for char in value)
