"""The Chinese RAG app's knowledge base, questions and scripted answers
(`tests/frameworks/apps/langchain_zh_app.py`), in a module of their own: the test reads
them from the monitor's environment, where the app's framework is not installed.

Numbers are written as Chinese text writes them (Chinese numerals, some answers in Arabic
digits for a document's numerals), names with the middle dot of transcribed names, and
punctuation full-width. The faithful answers restate their document in other words; the
planted ones change one fact: a price's numeral, a founder's name, a yield's numeral."""

from __future__ import annotations

# The prompt template of the app's chain: the documents, then the question.
PROMPT = "根据以下资料回答问题。\n资料：\n{context}\n问题：{question}"

KB: dict[str, str] = {
    "kb/canteen.md": "学校食堂的午餐套餐每份七欧元，包括一份主菜、一份米饭和一杯饮料。",
    "kb/piano.md": "拉斯克钢琴厂由伊万·拉斯克于一九三一年在布拉格创办，至今仍在生产立式钢琴。",
    "kb/orchard.md": "这个果园有三百棵苹果树，每棵树每年大约产十二公斤苹果。",
    "kb/library.md": "市图书馆周一至周五上午九点开门，晚上八点关门，周末不开放。",
    "kb/bridge.md": "老城的石桥全长二百四十米，于一八八九年建成，是当地最古老的桥。",
    "kb/mountain.md": "黄山位于安徽省南部，最高峰莲花峰海拔一千八百六十四米。",
    "kb/tea.md": "龙井茶产于杭州西湖一带，清明节前采摘的明前茶最为名贵。",
    "kb/river.md": "长江全长约六千三百公里，是中国最长的河流。",
}
# (question, the document that answers it, the faithful answer)
QUESTIONS: tuple[tuple[str, str, str], ...] = (
    ("学校食堂的午餐套餐多少钱？", "kb/canteen.md", "午餐套餐每份7欧元，含主菜、米饭和饮料。"),
    ("拉斯克钢琴厂是谁创办的？", "kb/piano.md", "这家钢琴厂是伊万·拉斯克在一九三一年创办的。"),
    ("果园里每棵苹果树一年产多少苹果？", "kb/orchard.md", "每棵苹果树一年能产大约十二公斤苹果。"),
    ("市图书馆几点开门？", "kb/library.md", "工作日图书馆上午九点开门。"),
    ("老城的石桥有多长？", "kb/bridge.md", "石桥全长二百四十米。"),
    ("黄山的最高峰有多高？", "kb/mountain.md", "黄山最高峰是莲花峰，海拔1864米。"),
)
ANSWERS: dict[str, str] = {uri: answer for _, uri, answer in QUESTIONS}
# The scripted model's wrong facts, in the order a run plants them (`planted-N`: the first N).
PLANTED: dict[str, str] = {
    "kb/canteen.md": "午餐套餐每份十五欧元，含主菜、米饭和饮料。",
    "kb/piano.md": "这家钢琴厂是玛丽·格兰特在一九三一年创办的。",
    "kb/orchard.md": "每棵苹果树一年能产大约四十公斤苹果。",
}
NO_ANSWER = "资料中没有答案。"


def planted(variant: str) -> dict[str, str]:
    """The wrong answers of a run `planted-N`, by the document they should answer from."""
    return dict(list(PLANTED.items())[: int(variant.removeprefix("planted-"))])


def scripted_answer(prompt: str, variant: str) -> str:
    """The scripted model's answer to a prompt: that of the document the prompt gives first
    (the retriever's top one), wrong where the run plants it; `NO_ANSWER` without one."""
    found = sorted((prompt.find(text), uri) for uri, text in KB.items() if text in prompt)
    if not found:
        return NO_ANSWER
    uri = found[0][1]
    return planted(variant).get(uri, ANSWERS[uri])
