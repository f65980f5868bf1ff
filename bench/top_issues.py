"""Benchmark: `flowrate top-issues`' grouping of 100,000 synthetic key issues, written the way
judges write them: 12 failure modes in English, Russian and Portuguese, each with several
phrasings, a filler clause drawn from a pool (so most texts are distinct even after the turn
references and values are taken out), turn numbers, order numbers, emails and quoted values.
It prints the time to read the issues into occurrences, to group them, and to make the modes,
the number of distinct texts grouped, and how pure the modes are (the share of issues in a mode
whose planted failure is the mode's most common one).

python bench/top_issues.py [--issues 100000]
"""

import argparse
import random
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flowrate.analysis.top_issues import TopIssues, group, occurrences  # noqa: E402
from flowrate.results.rows import EvaluationRow  # noqa: E402

MODES = {
    "order": [
        "asks again for the order number {n} given in turn {t}",
        "asks for order number {n} once more",
        "снова спрашивает номер заказа {n}",
        "pede de novo o número do pedido {n}",
    ],
    "refund": [
        "ignores the question about the refund of {amount}",
        "ignores the user's refund question",
        "игнорирует вопрос о возврате {amount}",
        "ignora a pergunta sobre o reembolso de {amount}",
    ],
    "hanging": [
        "the user's final message gets no reply",
        "the user's last question {q} gets no reply",
        "последний вопрос пользователя {q} остаётся без ответа",
        "a última pergunta do usuário {q} fica sem resposta",
    ],
    "upsell": [
        "pitches the {plan} plan instead of helping",
        "навязывает тариф {plan}",
        "empurra o plano {plan}",
    ],
    "email": [
        "asks for the email address {email} the user already gave",
        "снова просит адрес почты {email}",
        "pede o e-mail {email} que o usuário já informou",
    ],
    "contradiction": [
        "contradicts its earlier reply about the delivery date {date}",
        "противоречит своему прошлому ответу о дате доставки {date}",
        "contradiz a resposta anterior sobre a data de entrega {date}",
    ],
    "boilerplate": [
        "answers with generic boilerplate about the company's values",
        "отвечает общими шаблонными фразами о ценностях компании",
        "responde com texto genérico sobre os valores da empresa",
    ],
    "frustration": [
        "does not acknowledge the user's frustration",
        "не реагирует на раздражение пользователя",
        "não reconhece a frustração do usuário",
    ],
    "loop": [
        "repeats the same troubleshooting step {step} the user already tried",
        "повторяет тот же шаг {step}, который пользователь уже пробовал",
        "repete o mesmo passo {step} que o usuário já tentou",
    ],
    "wrong_intent": [
        "treats the cancellation request as a new booking",
        "принимает просьбу об отмене за новое бронирование",
        "trata o pedido de cancelamento como uma nova reserva",
    ],
    "made_up": [
        "makes up a tracking number {n} that does not exist",
        "выдумывает номер отслеживания {n}",
        "inventa um código de rastreio {n}",
    ],
    "handoff": [
        "promises a transfer to a human agent that never happens",
        "обещает перевести на оператора, но не переводит",
        "promete transferir para um atendente humano e não transfere",
    ],
}
FILLERS = [
    "",
    " instead of acting on it",
    " which costs the user a turn",
    " and the user has to repeat themselves",
    " so the user gets annoyed",
    ", и пользователю приходится повторять",
    ", e o usuário precisa repetir",
    " before doing anything else",
    " while the user waits",
    " — a clear lapse",
]
# the things a conversation is about: a context clause from two of these makes most texts distinct
TOPICS = (
    "parcel invoice router subscription booking flight seat refund voucher password account address"
    " delivery warranty screen battery charger table sofa ticket concert hotel room insurance claim"
    " посылка счёт роутер подписка бронь рейс место купон пароль аккаунт адрес доставка гарантия"
    " encomenda fatura roteador assinatura reserva voo assento cupom senha conta endereço entrega garantia"
).split()


def synthetic_rows(issues: int, seed: int = 1) -> list[EvaluationRow]:
    """Rows with `issues` key issues in all, two per row, each from a planted mode (its name in
    the row's metric field is not read by grouping; the id carries it for the purity figure)."""
    rng = random.Random(seed)
    names = list(MODES)
    rows = []
    day = datetime(2026, 11, 2, tzinfo=UTC)
    for index in range(issues // 2):
        turns = rng.randint(3, 12)
        texts, planted = [], []
        for _ in range(2):
            mode = names[min(int(rng.paretovariate(1.2)) - 1, len(names) - 1)]
            context = f" ({rng.choice(TOPICS)}, {rng.choice(TOPICS)})" if rng.random() < 0.8 else ""
            template = rng.choice(MODES[mode]) + rng.choice(FILLERS) + context
            text = template.format(
                n=rng.randint(1000, 99999),
                t=rng.randint(1, turns),
                amount=f"${rng.randint(5, 500)}.{rng.randint(0, 99):02d}",
                q=f'"{rng.choice(["hello?", "so?", "any update?", "и что?", "e então?"])}"',
                plan=rng.choice(["Fibre Max", "Gold", "Ultra", "Family"]),
                email=f"user{rng.randint(1, 9999)}@example.com",
                date=f"{rng.randint(1, 28)} May",
                step=f"'{rng.choice(['restart the router', 'clear the cache', 'log out and in'])}'",
            )
            texts.append(f"turn {rng.randint(1, turns)}: {text}")
            planted.append(mode)
        rows.append(
            EvaluationRow(
                id=f"{index}:{planted[0]}:{planted[1]}",
                metric="conversational_flow_rate",
                score=rng.choice([0.0, 0.3, 0.7, 0.9]),
                threshold=0.7,
                key_issues=texts,
                model="bench",
                rubric_version="v",
                evaluated_at=day,
                number_of_turns=turns,
            )
        )
    return rows


class Clock:
    """Wall and CPU seconds since the last lap: CPU apart, since the machine may be shared."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        taken = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return taken


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--issues", type=int, default=100_000)
    arguments = parser.parse_args()
    rows = synthetic_rows(arguments.issues)
    import sklearn.cluster  # noqa: F401  (the import is timed apart: about a second on a cold start)

    clock = Clock()
    found = occurrences(rows)
    read = clock.lap()
    grouping = group(found)
    grouped = clock.lap()
    run = TopIssues.__new__(TopIssues)  # the grouping timed apart from the modes made of it
    run.grouping, run.conversations, run.periods, run.growth = grouping, len(rows), {}, 0.05
    modes = run.modes()
    made = clock.lap()
    planted = {}
    for row in rows:
        key, first, second = row.id.split(":")
        planted[(row.id, row.key_issues[0])] = first
        planted[(row.id, row.key_issues[1])] = second
    pure = 0
    for members in grouping.members().values():
        kinds = Counter(planted[(o.id, o.text)] for o in members)
        pure += kinds.most_common(1)[0][1]
    print(f"key issues: {len(found):,}; distinct texts after normalising: {len(grouping.texts):,}")
    for name, (wall, cpu) in (("read", read), ("grouped", grouped), ("modes made", made)):
        print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    total = [sum(lap[i] for lap in (read, grouped, made)) for i in (0, 1)]
    print(f"total {total[0]:.2f} s wall, {total[1]:.2f} s CPU; {len(modes)} modes; purity {pure / len(found):.1%}")
    for mode in modes[:12]:
        print(f"  {mode.severity:.1f}  {mode.conversations:6d}  {mode.label}")


if __name__ == "__main__":
    main()
