"""Labelled questions for the injection decision (recover/relevance.py; issue 35), written for this project.

Four conversations, two in English and two in Chinese, two about software work and two about daily life. Each
``Fact`` is a turn the user said, the assistant's reply, and four ways of asking for it later:

- ``question``: a paraphrase, as a new question;
- ``back``: a back-reference in natural words ("what was the exact error again when …", "remind me, …",
  "刚才那个报错是什么？");
- ``quote``: a verbatim quote of the archived turn (a user pasting a line back);
- ``answer``: the string a block that answers them holds.

``unasked`` lists, per conversation, questions in its own domain whose answer was never said in it. A store built
from some conversations answers their facts (``answerable``); the facts and ``unasked`` questions of the others
have no answer in it (``unanswerable``). ``THIRD`` holds questions in a third language (Spanish, German, Russian)
about the English facts. ``split(i)``: facts at even positions are the tune split (what calibration reads), odd
ones the check split.

``conversation(name)`` gives the turns as OpenAI chat messages: each fact's user turn and reply, with small-talk
turns of the same conversation between them (deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONVERSATIONS", "THIRD", "UNASKED", "Fact", "answerable", "conversation", "split", "unanswerable"]


@dataclass(frozen=True)
class Fact:
    said: str
    reply: str
    question: str
    back: str
    quote: str
    answer: str


CONVERSATIONS: dict[str, list[Fact]] = {
    "deploy": [
        Fact(
            "The nightly import died again, here is the traceback: psycopg.errors.UniqueViolation: duplicate key "
            'value violates unique constraint "orders_external_ref_key"',
            "The importer inserts rows it already loaded on a retry. Switching the INSERT to ON CONFLICT "
            "(external_ref) DO NOTHING makes the retry idempotent.",
            "Why did the nightly import crash?",
            "what was the exact error again when the nightly import died?",
            "duplicate key value violates unique constraint",
            "orders_external_ref_key",
        ),
        Fact(
            "I moved the metrics exporter to port 9187 because 9100 is taken by node_exporter on the same box.",
            "Noted: the scrape config needs the new target, metrics-01:9187.",
            "Which port does the metrics exporter listen on now?",
            "remind me, which port did we give the exporter?",
            "because 9100 is taken by node_exporter on the same box",
            "9187",
        ),
        Fact(
            "Let's pin gunicorn to 21.2.0, the 22 release changed how it handles the --timeout flag with gevent.",
            "Pinned in requirements.txt: gunicorn==21.2.0, with a comment pointing at the gevent timeout change.",
            "What gunicorn version are we on?",
            "what did we pin gunicorn to earlier?",
            "changed how it handles the --timeout flag with gevent",
            "21.2.0",
        ),
        Fact(
            "The staging bucket is called acme-staging-artifacts-eu and it lives in eu-central-1.",
            "I updated the upload step to use s3://acme-staging-artifacts-eu/builds/.",
            "Where do the staging build artifacts get uploaded?",
            "what was the bucket name again?",
            "it lives in eu-central-1",
            "acme-staging-artifacts-eu",
        ),
        Fact(
            'CI fails on the lint job with: error: Library stubs not installed for "requests" (mypy).',
            "Adding types-requests to the dev dependencies fixes that mypy error.",
            "How do we fix the mypy failure in the lint job?",
            "that lint error from before, what was it about?",
            'Library stubs not installed for "requests"',
            "types-requests",
        ),
        Fact(
            "The cron for the cleanup job should be 15 3 * * * so it runs after the backup at 03:00.",
            "Set the schedule to 15 3 * * * in the cleanup CronJob manifest.",
            "When does the cleanup job run?",
            "remind me what schedule we chose for the cleanup job",
            "so it runs after the backup at 03:00",
            "15 3 * * *",
        ),
        Fact(
            "The feature branch for the invoice rework is feat/invoice-v3, please base your changes on it.",
            "Rebased onto feat/invoice-v3; the PDF renderer changes are on top.",
            "Which branch holds the invoice rework?",
            "what was the branch again for the invoice work?",
            "please base your changes on it",
            "feat/invoice-v3",
        ),
        Fact(
            "Our API rate limit for partners is 600 requests per minute, burst 50.",
            "I set the limiter to 600/min with a burst of 50 in config/ratelimit.yaml.",
            "What rate limit do partners get on the API?",
            "the limit we agreed for partners, how many requests was it?",
            "requests per minute, burst 50",
            "600",
        ),
        Fact(
            "The test database URL is postgresql://test:test@localhost:55432/app_test, keep it out of prod configs.",
            "Put it in .env.test only; the prod config reads DATABASE_URL from the secret store.",
            "What is the test database URL?",
            "which db url did I give you for the tests?",
            "keep it out of prod configs",
            "55432",
        ),
        Fact(
            "Memory keeps growing in the worker; the heap dump shows 2 million cached Session objects from "
            "sessionmaker without a close.",
            "Wrapping each task in a `with Session() as s:` block releases them; the leak is in tasks/sync.py.",
            "What was leaking memory in the worker?",
            "what did the heap dump show earlier?",
            "the heap dump shows 2 million cached Session objects",
            "tasks/sync.py",
        ),
        Fact(
            "Sentry DSN for the mobile backend goes to the project mobile-api-prod, team owner is Priya.",
            "Configured the mobile backend with the mobile-api-prod project; alerts go to Priya's team.",
            "Who owns the Sentry project of the mobile backend?",
            "you remember who owns the mobile Sentry project?",
            "team owner is Priya",
            "Priya",
        ),
        Fact(
            "Docker build is slow because the COPY . . comes before pip install, so every code change busts the "
            "cache layer.",
            "Moved COPY requirements.txt and pip install above COPY . .; rebuilds went from 4 minutes to 20 seconds.",
            "Why was the Docker build slow?",
            "what did we find out about the slow docker build?",
            "every code change busts the cache layer",
            "20 seconds",
        ),
    ],
    "life": [
        Fact(
            "My daughter's piano teacher is Mrs. Okafor, lessons are Thursdays at 5 pm.",
            "Got it, Thursdays at 5 with Mrs. Okafor. Want a weekly reminder?",
            "When are the piano lessons?",
            "remind me, what day did I say piano was?",
            "lessons are Thursdays at 5 pm",
            "Thursday",
        ),
        Fact(
            "The plumber quoted 340 euros to replace the water heater valve, he can come on the 14th.",
            "340 euros and the 14th; I'll keep that in the home repairs list.",
            "How much will the water heater repair cost?",
            "what was the plumber's quote again?",
            "he can come on the 14th",
            "340 euros",
        ),
        Fact(
            "Our cat Miso is allergic to chicken, the vet said to switch to a salmon-based food.",
            "Noted: no chicken for Miso, salmon food instead.",
            "What food should Miso eat?",
            "what did the vet say about the cat earlier?",
            "the vet said to switch to a salmon-based food",
            "salmon",
        ),
        Fact(
            "I booked the campsite at Lake Bled for August 3 to 7, pitch number 42.",
            "August 3-7 at Lake Bled, pitch 42. Do you need a packing list?",
            "Which pitch did I book at the campsite?",
            "remind me of the campsite details we talked about",
            "for August 3 to 7, pitch number 42",
            "42",
        ),
        Fact(
            "My mother's birthday is on November 19th and she wants a bread maker this year.",
            "November 19th, a bread maker. I can suggest some models under 150 euros.",
            "What does my mother want for her birthday?",
            "what gift did I say my mom wanted?",
            "she wants a bread maker this year",
            "bread maker",
        ),
        Fact(
            "I started running with the club on Saturdays, we meet at the north gate of the park at 8.",
            "Saturdays at 8 at the north gate. Good luck with the training!",
            "Where does the running club meet?",
            "where did I tell you the running club meets?",
            "we meet at the north gate of the park at 8",
            "north gate",
        ),
        Fact(
            "The car's next inspection is due in March, and the garage is Autohaus Berger on Kirchstrasse.",
            "March inspection at Autohaus Berger, Kirchstrasse. I'll remind you in February.",
            "Which garage does the car inspection?",
            "what was the garage called again?",
            "the garage is Autohaus Berger on Kirchstrasse",
            "Autohaus Berger",
        ),
        Fact(
            "My son's school trip to the science museum costs 25 euros and the form is due Friday.",
            "25 euros and the form by Friday; shall I add it to the to-do list?",
            "How much is the school trip?",
            "the school trip I mentioned, how much was it?",
            "the form is due Friday",
            "25 euros",
        ),
    ],
    "etl": [
        Fact(
            "同步任务又挂了，日志里是：ConnectionResetError: [Errno 104] Connection reset by peer，"
            "发生在写入 Kafka 的时候。",
            "是 Kafka 生产者的空闲连接被代理断开了，把 connections.max.idle.ms 调到 540000 就好。",
            "同步任务为什么失败？",
            "刚才那个报错是什么？",
            "Connection reset by peer，发生在写入 Kafka 的时候",
            "Errno 104",
        ),
        Fact(
            "我们把 ClickHouse 的 HTTP 端口改成 18123 了，因为 8123 被旧的监控服务占用。",
            "好的，连接串里的端口我都改成 18123 了。",
            "ClickHouse 现在用哪个端口？",
            "之前说的 ClickHouse 端口是多少来着？",
            "因为 8123 被旧的监控服务占用",
            "18123",
        ),
        Fact(
            "数据仓库的分区字段统一用 dt，格式是 yyyyMMdd，不要再用 partition_date。",
            "明白，新表都用 dt 分区，格式 yyyyMMdd。",
            "分区字段应该叫什么？",
            "刚才的分区字段规范是怎么定的？",
            "不要再用 partition_date",
            "yyyyMMdd",
        ),
        Fact(
            "Airflow 的调度时间定在每天凌晨 2 点 30 分，避开备份窗口。",
            "已经把 schedule_interval 设成 30 2 * * * 了。",
            "Airflow 每天几点跑？",
            "我们之前定的调度时间是几点？",
            "避开备份窗口",
            "30 2 * * *",
        ),
        Fact(
            "Spark 作业内存不够，报 java.lang.OutOfMemoryError: GC overhead limit exceeded。",
            "把 spark.executor.memory 从 4g 提到 8g，并开启 spark.sql.adaptive.enabled。",
            "Spark 作业内存问题怎么解决的？",
            "上次 Spark 那个内存报错怎么处理的？",
            "GC overhead limit exceeded",
            "8g",
        ),
        Fact(
            "测试环境的 Redis 密码放在 Vault 的 secret/etl/redis 路径下，不要写进代码。",
            "好的，代码里改成从 Vault 读取 secret/etl/redis。",
            "测试环境 Redis 的密码存在哪里？",
            "你还记得 Redis 密码放在哪个路径吗？",
            "不要写进代码",
            "secret/etl/redis",
        ),
        Fact(
            "负责数据质量告警的是王磊，告警发到钉钉群“数仓值班”。",
            "已经配置告警发到“数仓值班”群，并 @ 王磊。",
            "数据质量告警由谁负责？",
            "刚才说的告警负责人是谁？",
            "告警发到钉钉群",
            "王磊",
        ),
        Fact(
            "订单表每天大约新增 1200 万行，保留 180 天。",
            "按 1200 万行每天、保留 180 天估算，存储大约需要 6 TB。",
            "订单表的数据保留多久？",
            "之前提到的订单表保留期限是多少天？",
            "每天大约新增 1200 万行",
            "180 天",
        ),
        Fact(
            "Flink 检查点间隔设成 60 秒，超时 10 分钟，状态后端用 RocksDB。",
            "已更新：checkpoint 间隔 60s，超时 10min，RocksDB 状态后端。",
            "Flink 的检查点间隔是多少？",
            "刚才 Flink 检查点怎么配的来着？",
            "状态后端用 RocksDB",
            "60 秒",
        ),
        Fact(
            "上游接口返回 429 Too Many Requests，我们把并发从 32 降到 8。",
            "并发已降到 8，并加了指数退避重试。",
            "上游接口限流后并发改成了多少？",
            "之前那个 429 的问题，我们把并发调成多少了？",
            "429 Too Many Requests",
            "8",
        ),
    ],
    "family": [
        Fact(
            "我女儿的钢琴课改到每周六上午十点，老师姓陈。",
            "好的，每周六上午十点，陈老师。需要我提醒你吗？",
            "钢琴课是什么时候？",
            "我之前说钢琴课改到哪天了？",
            "老师姓陈",
            "周六",
        ),
        Fact(
            "下个月十五号要去杭州出差，住在西湖边的如家酒店。",
            "十五号杭州出差，如家酒店，我记下了。",
            "我去杭州住哪个酒店？",
            "刚才说的出差住哪里来着？",
            "住在西湖边的如家酒店",
            "如家",
        ),
        Fact(
            "家里的猫叫豆豆，对鸡肉过敏，只能吃三文鱼猫粮。",
            "记住了：豆豆不吃鸡肉，改吃三文鱼猫粮。",
            "豆豆能吃什么猫粮？",
            "你还记得猫对什么过敏吗？",
            "对鸡肉过敏",
            "三文鱼",
        ),
        Fact(
            "我妈妈的生日是腊月初八，她想要一个按摩椅。",
            "腊月初八，按摩椅。我可以帮你比较几款。",
            "妈妈生日想要什么礼物？",
            "之前我说妈妈想要什么来着？",
            "她想要一个按摩椅",
            "按摩椅",
        ),
        Fact(
            "儿子的英语补习班每节课 280 元，周三和周五晚上上课。",
            "每节 280 元，周三周五晚上。",
            "英语补习班多少钱一节课？",
            "我提到的补习班费用是多少？",
            "周三和周五晚上上课",
            "280",
        ),
        Fact(
            "车险下个月到期，保险公司是平安，保单号尾号 7731。",
            "平安车险，尾号 7731，下个月到期，我会提前提醒你。",
            "车险是哪家保险公司的？",
            "刚才说的车险保单尾号是多少？",
            "保单号尾号 7731",
            "7731",
        ),
        Fact(
            "周末要去外婆家，她住在苏州平江路附近。",
            "周末去平江路外婆家，路上注意安全。",
            "外婆住在哪里？",
            "我之前说外婆住哪儿？",
            "她住在苏州平江路附近",
            "平江路",
        ),
        Fact(
            "体检报告说我的维生素D偏低，医生建议每天补充 1000 IU。",
            "每天 1000 IU 维生素D，可以早餐后吃。",
            "医生建议我补充多少维生素D？",
            "体检时医生说的维生素D剂量是多少来着？",
            "维生素D偏低",
            "1000 IU",
        ),
    ],
}

UNASKED: dict[str, list[str]] = {
    "deploy": [
        "Which load balancer algorithm did we configure for the websocket gateway?",
        "What was the Terraform state bucket's lock table called?",
        "Which Kubernetes version is the production cluster on?",
        "what was the exact error again when the payment webhook timed out?",
        "remind me, which port did we give the Elasticsearch cluster?",
        "How many replicas does the search service run?",
        "What did we name the GraphQL schema registry?",
        "Which TLS cipher suites did we disable?",
    ],
    "life": [
        "What time is my dentist appointment?",
        "Which hotel did I book in Lisbon?",
        "remind me, what's my neighbour's dog called?",
        "How much did the new sofa cost?",
        "When is my son's football tournament?",
        "What did the pharmacist say about the allergy pills?",
        "Which flight did I take to Madrid?",
        "what was the name of the yoga studio again?",
    ],
    "etl": [
        "Hive 元数据库用的是哪个版本？",
        "刚才那个 Elasticsearch 的报错是什么？",
        "数据湖的压缩格式定的是什么？",
        "之前说的 Presto 集群有几个节点？",
        "监控大盘的刷新间隔是多少？",
        "我们用的 Kafka 分区数是多少来着？",
        "HDFS 的副本数配置成几了？",
        "权限系统接的是哪个 LDAP 服务器？",
    ],
    "family": [
        "牙医预约在哪天？",
        "我之前说的健身房叫什么名字？",
        "女儿的舞蹈老师姓什么？",
        "上次说的装修公司报价是多少？",
        "刚才说的航班号是多少来着？",
        "爸爸的降压药每天吃几次？",
        "邻居家的狗叫什么？",
        "我们家的宽带是哪家运营商的？",
    ],
}

# questions in a third language about the English facts: (conversation, fact index, question)
THIRD: list[tuple[str, int, str]] = [
    ("deploy", 1, "¿En qué puerto escucha ahora el exportador de métricas?"),
    ("deploy", 2, "Auf welche Version haben wir gunicorn festgelegt?"),
    ("deploy", 3, "Как называется бакет для артефактов staging?"),
    ("life", 0, "¿Cuándo son las clases de piano con la señora Okafor?"),
    ("life", 2, "Was soll die Katze Miso laut Tierarzt fressen?"),
    ("life", 6, "Как называется автосервис, где проходит техосмотр машины?"),
]

_FILLER = {
    "deploy": [
        ("Can you run the test suite once more?", "All 412 tests pass."),
        ("Thanks, let's take a short break.", "Sure, ping me when you're back."),
        ("Please format the changed files.", "Formatted with ruff format, no other changes."),
    ],
    "life": [
        ("Good morning!", "Good morning! What's on your list today?"),
        ("It's raining again here.", "Sounds like a day for indoor plans."),
        ("Thanks, that's all for now.", "Anytime."),
    ],
    "etl": [
        ("再跑一次单元测试。", "全部通过，共 236 个用例。"),
        ("好的，先休息一下。", "好的，回来叫我。"),
        ("帮我格式化一下改过的文件。", "已格式化，没有其他改动。"),
    ],
    "family": [
        ("早上好！", "早上好！今天有什么安排？"),
        ("今天又下雨了。", "适合在家休息。"),
        ("谢谢，先这样。", "不客气。"),
    ],
}


def conversation(name: str) -> list[dict]:
    """The turns of conversation ``name`` as OpenAI chat messages: each fact's turn and reply, a small-talk turn
    after every second fact."""
    messages: list[dict] = []
    fillers = _FILLER[name]
    for i, fact in enumerate(CONVERSATIONS[name]):
        messages += [{"role": "user", "content": fact.said}, {"role": "assistant", "content": fact.reply}]
        if i % 2:
            said, reply = fillers[(i // 2) % len(fillers)]
            messages += [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]
    return messages


def split(index: int) -> str:
    """The split of the fact at ``index``: "tune" (even) or "check" (odd)."""
    return "tune" if index % 2 == 0 else "check"


def answerable(archived: list[str]) -> list[tuple[str, int, Fact]]:
    """(conversation, index, fact) of every fact of the ``archived`` conversations."""
    return [(name, i, f) for name in archived for i, f in enumerate(CONVERSATIONS[name])]


def unanswerable(archived: list[str]) -> list[tuple[str, int, str]]:
    """(conversation, index, question) with no answer in a store of the ``archived`` conversations: every
    question of the others, and each conversation's ``UNASKED`` ones (index: its position there)."""
    out = []
    for name, facts in CONVERSATIONS.items():
        if name not in archived:
            for i, f in enumerate(facts):
                out += [(name, i, f.question), (name, i, f.back)]
    for name in CONVERSATIONS:
        out += [(name, i, q) for i, q in enumerate(UNASKED[name])]
    return out
