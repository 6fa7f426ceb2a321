"""Answerable and unanswerable questions over real-format conversations, for the relevance-floor tests (issue #19,
item 3; recover/relevance.py).

Three conversations of different lives, each a list of facts said in passing and the question a user later asks
about each: ``infra`` (a developer and a coding assistant: ports, flags, versions), ``home`` (a person telling an
assistant about family, pets, errands) and ``lab`` (a researcher's notes: samples, bookings, deadlines). A store
built from some of them answers their questions (``answerable``); the questions of a conversation never archived in
it have no answer there (``unanswerable``): they should get nothing, as LoCoMo's questions asked of another
conversation's store do in the eval (``lantern eval ... --split tune``, the ``no-answer`` row).

``conversation(name, seed)`` gives the turns as OpenAI chat messages: each fact stated by the user, acknowledged
by the assistant, with small-talk turns of the same conversation between them (the order and the fillers depend on
``seed``; deterministic).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["FACTS", "Fact", "answerable", "conversation", "unanswerable"]


@dataclass(frozen=True)
class Fact:
    said: str  # the user's turn that states it
    question: str  # asked later
    answer: str  # the string a block that answers the question holds


FACTS: dict[str, list[Fact]] = {
    "infra": [
        Fact(
            "Let's move the billing database to port 5433 so it stops clashing with my local Postgres.",
            "Which port did we put the billing database on?",
            "5433",
        ),
        Fact(
            "The staging Redis now runs on redis-staging-02 with maxmemory set to 512mb.",
            "How much memory did we give the staging Redis?",
            "512mb",
        ),
        Fact(
            "The deploy job only passes with NODE_OPTIONS=--max-old-space-size=4096 exported first.",
            "What NODE_OPTIONS does the deploy job need?",
            "max-old-space-size=4096",
        ),
        Fact(
            "We agreed to call the first migration 0001_create_accounts.",
            "What did we name the first migration?",
            "0001_create_accounts",
        ),
        Fact(
            "Webhook deliveries retry five times with exponential backoff starting at 2 seconds.",
            "How many times are webhook deliveries retried?",
            "five times",
        ),
        Fact(
            "Sentry alerts from the payments service should go to #payments-oncall, not #general.",
            "Which Slack channel gets the payments service's Sentry alerts?",
            "#payments-oncall",
        ),
        Fact(
            "I pinned numpy to 1.26.4 because 2.0 broke the wheel build on the CI runners.",
            "Which numpy version did we pin, and why?",
            "1.26.4",
        ),
        Fact(
            "The new checkout hides behind the feature flag checkout_v2_enabled until QA signs off.",
            "What is the feature flag of the new checkout called?",
            "checkout_v2_enabled",
        ),
    ],
    "home": [
        Fact(
            "My sister Ana just moved to Porto for a job at a bakery near the river.",
            "Where did my sister Ana move to?",
            "Porto",
        ),
        Fact(
            "Our dog Biscuit turned out to be allergic to chicken, so we switched him to salmon kibble.",
            "What is Biscuit allergic to?",
            "chicken",
        ),
        Fact(
            "I signed up for the Lisbon half marathon on 12 October, my first one since the knee surgery.",
            "When is the half marathon I signed up for?",
            "12 October",
        ),
        Fact(
            "The plumber says the boiler needs a new pressure valve, about 180 euros with labour.",
            "How much will the boiler's pressure valve cost?",
            "180 euros",
        ),
        Fact(
            "Lucia's piano lessons moved to Thursdays at 5 pm because her teacher changed schools.",
            "When are Lucia's piano lessons now?",
            "Thursdays at 5 pm",
        ),
        Fact(
            "For the book club this month we're reading The Left Hand of Darkness by Ursula K. Le Guin.",
            "Which novel is the book club reading this month?",
            "The Left Hand of Darkness",
        ),
        Fact(
            "We planted three lemon trees along the south fence last weekend.",
            "What did we plant along the south fence?",
            "lemon trees",
        ),
        Fact(
            "Grandma's lasagne only tastes right with a pinch of nutmeg in the bechamel.",
            "What spice goes into grandma's bechamel?",
            "nutmeg",
        ),
    ],
    "lab": [
        Fact(
            "Telescope time at La Palma is booked for the night of 14 March, weather permitting.",
            "When is our telescope time at La Palma?",
            "14 March",
        ),
        Fact(
            "Sample B7 is stored at minus 80 in freezer 3, top rack, left box.",
            "Where is sample B7 stored?",
            "freezer 3",
        ),
        Fact(
            "The ERC grant proposal is due on 29 April at noon Brussels time.",
            "When is the ERC proposal due?",
            "29 April",
        ),
        Fact(
            "For the plasma prep the centrifuge runs at 4,000 rpm for ten minutes.",
            "How fast does the centrifuge run for the plasma prep?",
            "4,000 rpm",
        ),
        Fact(
            "Reviewer 2 wants a control with scrambled siRNA before they accept the paper.",
            "Which control did reviewer 2 ask for?",
            "scrambled siRNA",
        ),
        Fact(
            "The PCR annealing temperature that finally worked for the ITS primers was 58 degrees.",
            "What annealing temperature worked for the ITS primers?",
            "58 degrees",
        ),
        Fact(
            "Maria's thesis defence is scheduled for 2 June in the aula.",
            "When is Maria's thesis defence?",
            "2 June",
        ),
        Fact(
            "The mass spectrometer is calibrated with caffeine as the reference standard.",
            "What do we calibrate the mass spectrometer with?",
            "caffeine",
        ),
    ],
}

_ACKS = [
    "Got it, I'll keep that in mind.",
    "Noted. Anything else you want me to track?",
    "Understood, thanks for telling me.",
    "Okay, I've made a note of that.",
]
_SMALL_TALK = {
    "infra": [
        ("Can you remind me to review the open pull requests after lunch?", "Sure, I'll remind you after lunch."),
        ("The tests are green again on main.", "Great, that unblocks the release branch."),
        ("I'm going to take a short break, back in ten.", "Sounds good, see you in ten."),
    ],
    "home": [
        ("It's been raining all week here.", "That sounds gloomy; hopefully the weekend is drier."),
        ("I finally cleaned out the garage.", "That's a big job done, well done."),
        ("Dinner tonight is just soup, too tired to cook.", "Soup is a perfectly good dinner."),
    ],
    "lab": [
        ("The coffee machine on our floor is broken again.", "Annoying; maybe the one downstairs works."),
        ("I spent the morning answering e-mails.", "Mornings like that happen; hope the afternoon is calmer."),
        ("Our group photo is on Friday.", "Good to know, I hope the weather is nice for it."),
    ],
}


def conversation(name: str, seed: int = 0) -> list[dict]:
    """The turns of conversation ``name`` (``FACTS``' keys) as OpenAI chat messages (user / assistant alternating):
    every fact of it, in an order and with small talk between them chosen by ``seed``."""
    rnd = random.Random(f"{name}:{seed}")
    facts = list(FACTS[name])
    rnd.shuffle(facts)
    messages: list[dict] = []
    for i, fact in enumerate(facts):
        messages += [{"role": "user", "content": fact.said}, {"role": "assistant", "content": rnd.choice(_ACKS)}]
        if i % 2 == 1:
            said, reply = rnd.choice(_SMALL_TALK[name])
            messages += [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]
    return messages


def answerable(archived: list[str]) -> list[Fact]:
    """The facts of the conversations ``archived``: a store holding them answers each question."""
    return [f for name in archived for f in FACTS[name]]


def unanswerable(archived: list[str]) -> list[Fact]:
    """The facts of every conversation not in ``archived``: their questions have no answer in that store."""
    return [f for name in FACTS if name not in archived for f in FACTS[name]]
