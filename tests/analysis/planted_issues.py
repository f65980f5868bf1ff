"""A hand-built run with planted failure modes, for the top-issues tests: four modes, each
written in English, Russian and Portuguese with varied wording, turn numbers and quoted values.

The planted ranking, by severity: the user left hanging at the end (low scores, last turn),
the ignored refund question (mid-conversation, low scores), the order number asked again
(early, scores that mostly pass: the most frequent, yet third), the upsell (mild)."""

import random
from datetime import UTC, datetime

from flowrate.results.rows import EvaluationRow
from tests.helpers import evaluation_row

PLANTED = ["hanging", "refund", "order_again", "upsell"]  # the planted ranking
LANGUAGES = ["en", "ru", "pt"]

WORDING = {
    "order_again": {
        "en": [
            "asks again for the order number {n} given in turn {t}",
            "asks for the order number {n} again, though the user already gave it",
            "asks the user to repeat the order number {n}",
            "asks once more for order number {n}, already given in turn {t}",
        ],
        "ru": [
            "снова спрашивает номер заказа {n}, уже названный в ходе {t}",
            "повторно спрашивает номер заказа {n}",
            "ещё раз спрашивает номер заказа {n}, хотя пользователь его назвал",
        ],
        "pt": [
            "pede de novo o número do pedido {n} informado no turno {t}",
            "pede novamente o número do pedido {n} que o usuário já deu",
            "pede outra vez o número do pedido {n}",
        ],
    },
    "refund": {
        "en": [
            "ignores the user's question about the refund",
            "ignores the question whether the refund of {amount} will be issued",
            "ignores the refund question and talks about {topic} instead",
            "ignores the user's refund question from turn {t}",
        ],
        "ru": [
            "игнорирует вопрос о возврате денег",
            "игнорирует вопрос пользователя о возврате {amount}",
            "игнорирует вопрос о возврате средств и говорит о другом",
        ],
        "pt": [
            "ignora a pergunta sobre o reembolso",
            "ignora a pergunta se o reembolso de {amount} será feito",
            "ignora a pergunta do usuário sobre o reembolso",
        ],
    },
    "hanging": {
        "en": [
            "the user's final request for help gets no reply",
            'the user\'s last question "{question}" gets no reply',
            "the user's final message gets no reply at all",
            "the user's last request gets no reply and the user is left hanging",
        ],
        "ru": [
            "последний вопрос пользователя остаётся без ответа",
            "последнее сообщение пользователя «{question}» остаётся без ответа",
            "последняя просьба пользователя остаётся без ответа",
        ],
        "pt": [
            "a última pergunta do usuário fica sem resposta",
            "a última mensagem do usuário, “{question}”, fica sem resposta",
            "o último pedido do usuário fica sem resposta",
        ],
    },
    "upsell": {
        "en": [
            "pitches the {plan} plan instead of helping",
            "pitches an upgrade to the {plan} plan the user did not ask for",
            "pitches the premium {plan} plan",
        ],
        "ru": [
            "навязывает тариф «{plan}», о котором не просили",
            "навязывает тариф {plan} вместо помощи",
            "навязывает платный тариф «{plan}»",
        ],
        "pt": [
            "empurra o plano {plan} em vez de ajudar",
            "empurra um upgrade para o plano “{plan}”",
            "empurra o plano premium {plan}",
        ],
    },
}
# how many conversations each planted mode costs, its scores and where it sits (turn of number_of_turns)
PLAN = {
    "hanging": {"conversations": 42, "scores": [0.0, 0.3], "where": "end"},
    "refund": {"conversations": 54, "scores": [0.3, 0.3, 0.0], "where": "middle"},
    "order_again": {"conversations": 72, "scores": [0.7, 0.9], "where": "start"},
    "upsell": {"conversations": 24, "scores": [0.9], "where": "middle"},
}
CRITERIA = {"order_again": "slot_filling", "hanging": "request_completion", "refund": "intent_accuracy"}
# the things a conversation is about, for runs with more distinct texts than grouping clusters at once
TOPICS = {
    "en": "parcel invoice router subscription booking flight seat voucher password account address delivery"
    " warranty screen battery charger sofa ticket concert hotel insurance claim".split(),
    "ru": "посылка счёт роутер подписка бронь рейс место купон пароль аккаунт адрес доставка гарантия экран"
    " батарея зарядка диван билет концерт отель страховка".split(),
    "pt": "encomenda fatura roteador assinatura reserva voo assento cupom senha conta endereço entrega garantia"
    " tela bateria carregador sofá bilhete show hotel seguro".split(),
}


def _turn(where: str, turns: int, rng: random.Random) -> int:
    if where == "end":
        return turns
    if where == "start":
        return rng.randint(1, 2)
    return rng.randint(3, turns - 2)


def _text(mode: str, language: str, rng: random.Random, turn: int, topics: bool = False) -> str:
    template = rng.choice(WORDING[mode][language])
    if topics:  # what the conversation was about, as a judge may add: most texts become distinct
        template += f" ({rng.choice(TOPICS[language])}, {rng.choice(TOPICS[language])})"
    body = template.format(
        n=rng.choice(["77812", "#4471", "A-5521", "'ZX-90'", '"88213"', "№ 30117"]),
        t=max(turn - 1, 1),
        amount=rng.choice(["$39.90", "R$ 120,00", "1 500 ₽", "€12"]),
        topic=rng.choice(["delivery times", "the loyalty card"]),
        question=rng.choice(["so will I get my money?", "hello??", "и что теперь?", "e agora?"]),
        plan=rng.choice(["Fibre Max", "Gold", "Family 5G", "Ultra"]),
    )
    prefix = rng.choice(["turn {t}: ", "Turn {t}: ", "turn {t} - "])
    return prefix.format(t=turn) + body


def planted_rows(
    seed: int = 7, day: datetime | None = None, plan: dict | None = None, topics: bool = False
) -> list[EvaluationRow]:
    """About 200 rows (or as `plan` says): one conversational_flow_rate row per conversation
    with its planted key issue, some criteria rows raising the same mode, and passing
    conversations with no issue. Conversation ids record the planted mode and language
    (`hanging-ru-12`). `topics` adds to each issue two things the conversation was about."""
    rng = random.Random(seed)
    day = day or datetime(2026, 11, 2, 9, tzinfo=UTC)
    rows = []
    for mode, spec in (plan or PLAN).items():
        for index in range(spec["conversations"]):
            language = LANGUAGES[index % 3]
            turns = rng.randint(5, 8)
            turn = _turn(spec["where"], turns, rng)
            key = f"{mode}-{language}-{index}"
            score = rng.choice(spec["scores"])
            issue = _text(mode, language, rng, turn, topics)
            rows.append(issue_row(key, score, [issue], turns, day))
            if mode in CRITERIA and index % 4 == 0:
                rows.append(
                    issue_row(key, score, [_text(mode, language, rng, turn, topics)], turns, day, CRITERIA[mode])
                )
    for index in range(20):
        rows.append(issue_row(f"clean-{index}", 1.0, [], 4, day))
    return rows


def planted_mode(conversation_id: str) -> str:
    """The planted mode of a conversation id from `planted_rows`."""
    return conversation_id.rsplit("-", 2)[0]


def issue_row(key, score, issues, turns=6, day=None, metric="conversational_flow_rate") -> EvaluationRow:
    """A judged row of `metric` with these key issues, over a conversation of `turns` turns."""
    day = day or datetime(2026, 11, 2, tzinfo=UTC)
    return evaluation_row(key, score, metric=metric, key_issues=issues, number_of_turns=turns, evaluated_at=day)
