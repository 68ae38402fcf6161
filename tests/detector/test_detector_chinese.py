"""The detector on Chinese: numerals as values, word boundaries, Traditional folded to
Simplified, the planted-error probe's bars, and the script gate of the embedded evaluators."""

from __future__ import annotations

import pytest

from monitor.config import EvaluatorConfig
from monitor.detector import cjk, score_groundedness
from monitor.detector.embedding import shared_embedder
from monitor.detector.features import analyse
from monitor.detector.text import fold, number_value, sentences, tokens
from monitor.evaluators.local import LocalGroundedness, LocalRelevance, LocalSafety
from monitor.processors.evaluation._task import planned
from monitor.records import RagRecord, scripts
from training import probe_zh


@pytest.mark.parametrize(
    ("numeral", "value"),
    [
        ("七", 7), ("十五", 15), ("十", 10), ("二十", 20), ("一百零五", 105), ("三千零五十", 3050),
        ("两千三百", 2300), ("一万二千", 12000), ("三亿", 3e8), ("一九三一", 1931),
        ("二〇二三", 2023), ("壹佰贰拾", 120), ("叁仟", 3000), ("3万", 30000),
        ("1.5亿", 1.5e8), ("一点五亿", 1.5e8), ("三点五", 3.5), ("七點五", 7.5),
        ("百分之十二", 12), ("第三", 3), ("１２", 12), ("零", 0),
        # A last digit straight after a unit counts in the unit below it; after 零 it is a
        # digit of its own.
        ("二百五", 250), ("三千二", 3200), ("一万二", 12000), ("四万五", 45000), ("三亿五", 3.5e8),
        ("三千零二", 3002), ("一百零五", 105),
        # Financial forms, Simplified and Traditional, and Traditional scales.
        ("贰佰伍拾", 250), ("貳佰伍拾", 250), ("壹萬貳仟", 12000), ("參仟", 3000), ("兩萬", 20000),
        ("陆拾", 60), ("玖佰零捌", 908), ("一億", 1e8),
        # Tenths of a whole: 六成 is 60 per cent, 七折 70 per cent of the price, 七五折 75.
        ("六成", 60), ("七折", 70), ("七五折", 75),
        # Mixed with Arabic digits, decimals.
        ("2万5千", 25000), ("0.5亿", 5e7), ("二点五", 2.5), ("零点五", 0.5),
    ],
)  # fmt: skip
def test_chinese_numerals_have_their_values(numeral: str, value: float) -> None:
    assert cjk.value(numeral) == value


@pytest.mark.parametrize("word", ["一", "十分", "千万", "万一", "一些", "四川", "三明治", "统一"])
def test_words_written_with_numerals_are_no_numbers(word: str) -> None:
    assert number_value(word) is None


def test_numbers_are_tokens_of_their_own_with_their_values() -> None:
    text = (
        "营收达到1.5亿元，3万人参加，增长百分之十二，１２公斤，二〇二三年五月十日，一些人十分高兴。"
    )
    values = {t: number_value(t) for t in tokens(text)}
    assert values["1.5亿"] == "150000000" and values["3万"] == "30000"
    assert values["百分之十二"] == "12" and values["１２"] == "12"
    assert values["二〇二三"] == "2023" and values["五"] == "5" and values["十"] == "10"
    assert "一些" in values and values["一些"] is None
    assert "元" in values and "公斤" in values and "年" in values


def test_han_runs_are_cut_into_words_and_offsets_match() -> None:
    text = "北风面包店由伊万·拉斯克于一九三一年在哈尔滨创立。"
    words = tokens(text)
    assert {"面包店", "伊万", "哈尔滨", "创立", "一九三一", "年"} <= set(words)
    assert "北风面包店由伊万" not in words


def test_sentences_end_at_full_width_stops() -> None:
    text = "店里的面包七欧元。周一不营业！还有问题吗？Yes. It opens at 6."
    assert sentences(text) == [
        "店里的面包七欧元。",
        "周一不营业！",
        "还有问题吗？",
        "Yes.",
        "It opens at 6.",
    ]


def test_traditional_and_simplified_fold_alike() -> None:
    assert fold("燈塔") == fold("灯塔") == "灯塔"
    assert fold("自動系統") == "自动系统"


def test_english_text_never_reaches_the_chinese_path() -> None:
    assert not cjk.has_han("The rye bread costs 7 euros (not 15) at Zürich's bakery.")


_CONTEXT = [
    "北风面包店由伊万·拉斯克于一九三一年在哈尔滨创立。店里的黑麦面包每个售价七欧元，每天早上六点出炉。",
    "青石农场的养蜂场每公顷每年可产蜂蜜十二公斤。",
]


@pytest.mark.parametrize(
    ("question", "faithful", "planted"),
    [
        ("黑麦面包多少钱？", "黑麦面包一个要七欧元。", "黑麦面包一个要十五欧元。"),
        ("面包店是哪年创办的？", "它是一九三一年开办的。", "它是一九七五年开办的。"),
        ("谁创办了面包店？", "创办人是伊万·拉斯克。", "创办人是玛丽·格兰特。"),
        (
            "农场每公顷产多少蜂蜜？",
            "每公顷一年大约产十二公斤蜂蜜。",
            "每公顷一年大约产四十公斤蜂蜜，还获得过国家级金奖。",
        ),
        ("黑麦面包多少钱？", "黑麦面包一个要7欧元。", "黑麦面包一个要15欧元。"),
    ],
)
def test_the_issues_planted_chinese_answers_fail_and_their_twins_pass(
    question: str, faithful: str, planted: str
) -> None:
    assert score_groundedness(question, _CONTEXT, faithful).score >= 0.5
    assert score_groundedness(question, _CONTEXT, planted).score < 0.5


def test_a_traditional_answer_is_read_against_simplified_documents() -> None:
    assert score_groundedness("黑麥麵包多少錢？", _CONTEXT, "黑麥麵包一個要七歐元。").score >= 0.5
    assert score_groundedness("黑麥麵包多少錢？", _CONTEXT, "黑麥麵包一個要十五歐元。").score < 0.5


def test_the_probe_has_its_splits_every_kind_and_paraphrased_faithful_answers() -> None:
    assert len(probe_zh.DEV) >= 95 and len(probe_zh.HELDOUT) >= 30 and len(probe_zh.SEEN) == 16
    assert len(probe_zh.HELDOUT2) >= 30
    # `all` leaves the second held-out split out: it is scored once, by name.
    assert {r["label"]["split"] for r in probe_zh.build("all")} == {"dev", "heldout", "seen"}  # type: ignore[index]
    for split in probe_zh.ITEMS:
        records = probe_zh.build(split)
        kinds = {r["label"]["kind"] for r in records}  # type: ignore[index]
        assert kinds == {"faithful", *probe_zh.KINDS}
        assert {r["label"]["script"] for r in records} == {"simplified", "traditional"}  # type: ignore[index]
    every = (*probe_zh.DEV, *probe_zh.HELDOUT, *probe_zh.SEEN, *probe_zh.HELDOUT2)
    items = {i.question: i for i in every}
    assert len(items) == len(every)  # no question in two splits
    for item in items.values():
        # Paraphrased: a faithful answer is no sentence of its documents.
        assert all(item.faithful not in doc for doc in item.documents)


# The held-out split as measured once the detector was done (docs/quality.md): bars, not
# targets, so that a change losing what it catches fails here.
HELDOUT_FAITHFUL = 0.20
HELDOUT_ERRORS = 0.87


def test_the_probe_scores_at_the_bars_docs_quality_states() -> None:
    """The figures docs/quality.md gives (every split at the shipped threshold): a change
    that loses planted errors or fails more faithful answers fails here."""
    table = {split: probe_zh.failing_shares(split)[split] for split in ("heldout", "seen")}
    assert table["heldout"]["faithful"] <= HELDOUT_FAITHFUL
    assert table["heldout"]["all errors"] >= HELDOUT_ERRORS
    # The first round's held-out half, and its development half: their first bars kept.
    assert table["seen"]["faithful"] <= 0.19
    assert table["seen"]["all errors"] >= 0.89
    dev = probe_zh.build("dev")
    fails = [_fails(r) for r in dev]
    # The development split as a whole, its first 95 items (the second round's development
    # split, whose bars were 0.04 and 0.85), and its first 20 (the first round's).
    for items, most_faithful, least_errors in (
        (len(dev), 0.05, 0.85),
        (95, 0.02, 0.86),
        (20, 0.0, 0.90),
    ):
        mine = [(r, f) for r, f in zip(dev, fails, strict=True) if _item(r) < items]
        faithful = [f for r, f in mine if r["label"]["kind"] == "faithful"]  # type: ignore[index]
        errors = [f for r, f in mine if r["label"]["kind"] != "faithful"]  # type: ignore[index]
        assert sum(faithful) / len(faithful) <= most_faithful
        assert sum(errors) / len(errors) >= least_errors


def _item(record: dict[str, object]) -> int:
    return int(str(record["label"]["item"]).rsplit("-", 1)[1])  # type: ignore[index]


def _fails(record: dict[str, object]) -> bool:
    context = [str(c["content"]) for c in record["retrieved_context"]]  # type: ignore[attr-defined]
    verdict = score_groundedness(str(record["request"]), context, str(record["response"]))
    return verdict.score < 0.5


_HEADS = ["青石农场位于云南大理。合唱团每周四晚上在市文化馆排练。"]


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("电池有75千瓦时", {"75": "75"}),  # 千瓦时 is the unit, not a thousand
        ("电池有七十五千瓦时", {"七十五": "75"}),
        ("雙人房一晚3千2百元", {"3千2百": "3200"}),
        ("3万人参加", {"3万": "30000"}),
    ],
)
def test_a_numeral_starting_a_measure_word_is_no_scale(text: str, numbers: dict[str, str]) -> None:
    found = {t: number_value(t) for t in tokens(text) if number_value(t) is not None}
    assert found == numbers


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("营收1.5千万元", {"1.5千万": "15000000"}),  # 千万 after a digit is a scale
        ("寿险占六成", {"六成": "60"}),
        ("大学生打七五折", {"七五折": "75"}),
        ("售價貳佰伍拾元", {"貳佰伍拾": "250"}),
    ],
)
def test_numerals_of_every_form_are_single_tokens(text: str, numbers: dict[str, str]) -> None:
    found = {t: number_value(t) for t in tokens(text) if number_value(t) is not None}
    assert found == numbers


@pytest.mark.parametrize(
    ("context", "supported"),
    [
        ("疫苗两周后生效。", 14),  # weeks in days
        ("疫苗兩週後生效。", 14),  # the same in Traditional
        ("打完疫苗14天后生效。", 2),  # days in weeks, where they divide
        ("效果持续半年。", 6),  # half a year in months
        ("直达车约需一个半小时。", 1.5),
        ("直达车约需一个半小时。", 90),
        ("每天早上六点半出炉。", 30),  # half past six: 6点30分
        ("隧道全长六千八百米。", 6.8),  # metres in kilometres
        ("隧道全长6800米。", 6.8),
        ("寿险占三成。", 30),
        ("博物馆周二至周日开放。", 6),  # a day inside a range of week days
        ("博物馆星期一到星期五开放。", 3),
    ],
)
def test_a_contexts_amounts_support_their_other_forms(context: str, supported: float) -> None:
    assert supported in cjk.written_values(context)


def test_the_generous_reading_stays_within_its_forms() -> None:
    # Not every number between two others: only a range of the week's days.
    assert 4 not in cjk.written_values("需在二至六摄氏度冷藏。")
    # A year is no amount of months.
    assert 1931 * 12 not in cjk.written_values("面包店于一九三一年创立。")


def test_a_contexts_numerals_inside_words_support_a_claims_numbers() -> None:
    context = ["诊所每周三下午接种，每晚十点关门，首批获得一枚银牌。"]
    for answer in ("星期三下午接种。", "晚上10点关门。", "第一批拿到1枚银牌。"):
        assert score_groundedness("什么时候？", context, answer).score >= 0.5
    assert score_groundedness("什么时候？", context, "晚上11点关门。").score < 0.5


def test_a_name_with_a_character_glued_on_is_that_name() -> None:
    context = ["苏雨桐来自浙江温州，教练是韩立平。"]
    assert score_groundedness("她是哪里人？", context, "苏雨桐是温州人。").score >= 0.5
    assert score_groundedness("她是哪里人？", context, "苏雨桐是台州人。").score < 0.5


@pytest.mark.parametrize(
    ("context", "faithful", "negated"),
    [
        ("图书馆每周开放六天，周二闭馆。", "其余六天都对读者开放。", "其余六天也不对读者开放。"),
        ("动物园成人票价八十元，儿童半价。", "小孩只要付一半。", "小孩不能享受半价。"),
        ("每十股派发现金红利三元。", "每10股分3元现金。", "今年不派发现金红利。"),
        ("岛上禁止机动车通行。", "岛上不允许机动车行驶。", "岛上允许机动车通行。"),
    ],
)
def test_a_chinese_clause_negating_its_context_clause_fails(
    context: str, faithful: str, negated: str
) -> None:
    assert score_groundedness("怎么样？", [context], faithful).score >= 0.5
    verdict = score_groundedness("怎么样？", [context], negated)
    assert verdict.score < 0.5
    assert any(c.kind == "negation" for c in verdict.contradictions)


def test_a_bound_on_a_quantity_negates_no_unit() -> None:
    context = ["大桥由省交通设计院设计。桥上限速每小时八十公里。"]
    faithful = "过桥时速不能超过80公里。"
    assert score_groundedness("限速多少？", context, faithful).score >= 0.5
    assert score_groundedness("限速多少？", context, "过桥时速不能超过60公里。").score < 0.5


def test_a_negation_read_without_its_conjunction() -> None:
    context = ["酸奶每杯一百八十克，需在二至六摄氏度冷藏，保质期二十一天。"]
    verdict = score_groundedness("要冷藏吗？", context, "这款酸奶能放21天，而且不需要冷藏。")
    assert any(c.kind == "negation" for c in verdict.contradictions)
    assert verdict.score < 0.5
    assert score_groundedness("要冷藏吗？", context, "这款酸奶能放21天，但要冷藏。").score >= 0.5


def test_a_comparison_with_no_negates_nothing() -> None:
    context = ["该塔高约一百三十六米，是当时最高的木塔。"]
    answer = "塔高136米，在当时没有比它更高的木塔。"
    verdict = score_groundedness("塔有多高？", context, answer)
    assert not any(c.kind == "negation" for c in verdict.contradictions)


def test_a_noun_swapped_for_one_of_its_kind_fails() -> None:
    question = "合唱团在哪里排练？"
    faithful = score_groundedness(question, _HEADS, "他们每周四晚上在市文化馆练习。")
    swapped = score_groundedness(question, _HEADS, "他们每周四晚上在市体育馆练习。")
    assert faithful.score >= 0.5
    assert swapped.score < 0.5
    assert any(c.kind == "kind" and c.said == "体育馆" for c in swapped.contradictions)


def test_words_differing_in_function_morphemes_are_no_swap() -> None:
    context = ["入住时间为下午两点以后，退房时间为中午十二点以前。"]
    verdict = score_groundedness("几点退房？", context, "退房要在12点之前完成。")
    assert not any(c.kind == "kind" for c in verdict.contradictions)
    assert verdict.score >= 0.5


def test_a_compound_of_common_words_weighs_as_its_parts() -> None:
    # In the dictionary, rarely counted, but made of common words: not as specific as a name.
    assert cjk.specificity("每天晚上") < 0.5 and cjk.specificity("开瓶") < 0.5
    # A name keeps a rare part: it stays specific.
    assert cjk.specificity("贝聿铭") > 0.8


_SHIP = [
    "远航号货轮于二〇〇九年在大连造船厂下水，全长二百九十米，载重量约十八万吨。",
    "该船的船长是挪威人安德斯·霍尔姆，船员共二十四人，主要往返于青岛和鹿特丹之间。",
]


@pytest.mark.parametrize(
    ("faithful", "planted"),
    [
        # A number of the answer's own, in a later sentence of the answer.
        (
            "这艘船长290米，能装大约18万吨货。它2009年下水。",
            "这艘船长290米，能装大约18万吨货。它2011年下水。",
        ),
        (
            "船长叫安德斯·霍尔姆，来自挪威。船上一共有24名船员。",
            "船长叫安德斯·霍尔姆，来自挪威。船上一共有42名船员。",
        ),
        # A name the context never gives, in an answer of two sentences.
        (
            "船长叫安德斯·霍尔姆，来自挪威。航线在青岛和鹿特丹之间。",
            "船长叫安德斯·霍尔姆，来自挪威。航线在青岛和汉堡之间。",
        ),
    ],
)
def test_a_planted_fact_of_a_longer_answer_fails_and_its_paraphrase_passes(
    faithful: str, planted: str
) -> None:
    assert score_groundedness("介绍一下远航号。", _SHIP, faithful).score >= 0.5
    assert score_groundedness("介绍一下远航号。", _SHIP, planted).score < 0.5


@pytest.mark.parametrize(
    ("faithful", "planted"),
    [
        ("隧道差不多有6.8公里长。", "隧道差不多有8.6公里长。"),
        ("打完疫苗大概14天后才有保护作用。", "打完疫苗大概3天后才有保护作用。"),
        ("每天早上6点30分出炉。", "每天早上7点30分出炉。"),
    ],
)
def test_a_number_in_another_unit_of_its_measure_is_the_contexts(
    faithful: str, planted: str
) -> None:
    context = ["翠屏山隧道全长六千八百米。流感疫苗接种后约两周产生保护力。面包每天早上六点半出炉。"]
    assert score_groundedness("怎么样？", context, faithful).score >= 0.5
    assert score_groundedness("怎么样？", context, planted).score < 0.5


def test_a_clause_of_many_words_the_context_never_backs_is_invented() -> None:
    context = ["入住时间为下午两点以后，退房时间为中午十二点以前。"]
    faithful = "下午2点起就能办理入住，退房要在12点之前完成。"
    added = "下午2点起就能办理入住，退房要在12点之前完成，晚到的客人可以免费升级房型。"
    assert score_groundedness("几点入住？", context, faithful).score >= 0.5
    (check,) = analyse("几点入住？", context, added, shared_embedder()).sentences
    assert [clause for clause, _ in check.invented] == ["晚到的客人可以免费升级房型。"]


def test_a_clause_of_a_topic_the_context_lacks_is_invented() -> None:
    context = ["公司去年营业收入四十七亿元，净利润五点六亿元。"]
    question = "公司去年赚了多少？"
    faithful = "去年营收47亿元，净利润5.6亿元。"
    added = "去年营收47亿元，净利润5.6亿元，主要来自海外市场。"
    assert score_groundedness(question, context, faithful).score >= 0.5
    # Its words are common ones (主要, 来自, 市场 weigh nothing by the dictionary's counts),
    # but none shares a character with the context: the clause is invented all the same.
    (check,) = analyse(question, context, added, shared_embedder()).sentences
    assert [clause for clause, _ in check.invented] == ["主要来自海外市场。"]
    (plain,) = analyse(question, context, faithful, shared_embedder()).sentences
    assert plain.invented == []


def _record(response: str) -> RagRecord:
    return RagRecord.model_validate(
        {
            "request_id": "r1",
            "query": "价格？",
            "response": response,
            "retrieved_context": [{"content": "七欧元"}],
        }
    )


@pytest.mark.parametrize(
    ("response", "script"),
    [
        ("ราคาเจ็ดยูโรต่อก้อน", "thai"),
        ("السعر سبعة يورو للرغيف", "arabic"),
        ("빵 한 개의 가격은 칠 유로입니다", "hangul"),
        ("Цена семь евро", "cyrillic"),
        ("מחיר שבעה יורו", "hebrew"),
        ("कीमत सात यूरो है", "devanagari"),
        ("黑麦面包每个七欧元。", "han"),
        ("ライ麦パンは一個七ユーロです。", "japanese"),
        ("Das Brot kostet sieben Euro.", "latin"),
        ("12345", "none"),
    ],
)
def test_a_records_script_is_counted_from_its_letters(response: str, script: str) -> None:
    assert scripts.record_script(_record(response)) == script


def test_embedded_scorers_that_cannot_read_a_script_are_not_planned() -> None:
    names = ["local_groundedness", "local_relevance", "local_safety"]
    scorers = {
        "local_groundedness": LocalGroundedness(EvaluatorConfig(name="local_groundedness")),
        "local_relevance": LocalRelevance(EvaluatorConfig(name="local_relevance")),
        "local_safety": LocalSafety(EvaluatorConfig(name="local_safety")),
    }
    for thai_arabic_korean in ("ราคาเจ็ดยูโร", "السعر سبعة يورو", "가격은 칠 유로"):
        assert planned(_record(thai_arabic_korean), names, scorers, False) == []
    # Chinese is read by the word checks, not by the English safety word lists.
    assert planned(_record("七欧元。"), names, scorers, False) == names[:2]
    assert planned(_record("Seven euros."), names, scorers, False) == names


def test_the_majority_of_letters_decides_the_script() -> None:
    assert scripts.script("ราคาเจ็ดยูโรที่ร้าน 北风 ในเมือง") == "thai"
    assert scripts.script("The word สวัสดี means hello in Thai.") == "latin"


def test_a_numeral_of_thousands_of_digits_is_read_without_error() -> None:
    """A sender controls the text: a numeral longer than Python converts to an int (4,300
    digits) is still a number, and the answer is scored."""
    answer = "价格是" + "一九" * 3_000 + "元，或者" + "三" * 5_000 + "点" + "五" * 5_000 + "亿元。"
    assert score_groundedness("多少钱？", ["价格是七元。"], answer).score < 0.5


@pytest.mark.parametrize(
    ("context", "faithful", "planted"),
    [
        # A time of the clock: hour 点 minutes 分, quarters 刻, the afternoon over a range.
        ("返程车下午四点四十五分从湖边出发。", "回程的车16:45从湖边开。", "回程的车17:45从湖边开。"),
        ("专线每天早上八点一刻从客运中心发车。", "专线大巴每天8:15从客运中心出发。", "专线大巴每天9:15从客运中心出发。"),
        ("课后服务时间为下午三点四十分至五点半。", "课后服务从15:40开始，17:30结束。", "课后服务从15:40开始，18:30结束。"),
        # A count in another unit of its measure (十二个月 is a year, not three years), in
        # two units written together, with a half after its measure word.
        ("复合滤芯建议每十二个月更换一次，RO膜滤芯每二十四个月更换一次。整机保修三年。", "复合滤芯大概1年换一次，RO膜每2年换一次；整机保修3年。", "复合滤芯大概1年换一次，RO膜每4年换一次；整机保修3年。"),
        ("直达车行驶时间约一小时三十五分，全票一千四百九十元。", "坐直达车大约1小时35分钟，全票是1490元。", "坐直达车大约2小时35分钟，全票是1490元。"),
        ("旅游专线每天早上八点一刻从客运中心发车，车程约两个半小时。", "专线大巴每天8:15从客运中心出发，路上要2.5个小时左右。", "专线大巴每天8:15从客运中心出发，路上要3.5个小时左右。"),
        # A negated comparative is a bound: 不得低于 is 至少.
        ("试用期工资不得低于岗位最低档工资的百分之八十。", "试用期的工资至少要有岗位最低档工资的80%。", "试用期的工资至少要有岗位最低档工资的60%。"),
    ],
)  # fmt: skip
def test_a_paraphrased_number_is_read_as_the_contexts(
    context: str, faithful: str, planted: str
) -> None:
    assert score_groundedness("什么时候？", [context], faithful).score >= 0.5
    assert score_groundedness("什么时候？", [context], planted).score < 0.5


def test_a_clock_time_is_its_hour_and_minutes_not_a_decimal() -> None:
    assert {16.0, 45.0} <= set(cjk.written_values("下午四点四十五分"))
    assert {8.0, 15.0} <= set(cjk.written_values("早上八点一刻"))
    # Without 分 or 刻 the numeral is a decimal: 3.5 kilograms, not half past three.
    assert 5.0 not in cjk.written_values("三点五公斤")


def test_a_lone_two_counting_what_the_context_names_is_no_number_of_its_own() -> None:
    stations = ["台灣高鐵從台北站到左營站全程約三百四十五公里，直達車約需一個半小時。"]
    answer = "坐直達車大概1.5小時就到了。兩站相距約345公里。"
    assert score_groundedness("多久？", stations, answer).score >= 0.5
    lanes = ["翠屏山隧道全长六千八百米，是双向四车道公路隧道，二〇一五年六月建成通车。"]
    answer = "这条隧道有6.8公里长，双向各两条车道。"
    assert score_groundedness("多长？", lanes, answer).score >= 0.5
    # Counting what the context never names, 两 is a number the answer invented.
    telescope = ["天文台的主镜口径为二点四米。"]
    answer = "主镜口径为2.4米，还发现过两颗新的彗星。"
    assert score_groundedness("怎么样？", telescope, answer).score < 0.5


def test_zero_where_a_range_starts_is_no_amount() -> None:
    context = ["该车百公里加速五点九秒。"]
    assert score_groundedness("多快？", context, "零到一百公里加速只要5.9秒。").score >= 0.5
    assert score_groundedness("多快？", context, "零到一百公里加速只要4.9秒。").score < 0.5
