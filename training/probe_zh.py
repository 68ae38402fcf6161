"""The Chinese planted-error probe: hand-written questions about invented facts, each answered
once faithfully (in other words than the documents) and again with one planted error.

    python -m training.probe_zh [--out PROBE.jsonl] [--split dev|heldout|all]

Every item is a question, two retrieved documents and a faithful answer that paraphrases
them; its planted answers change one fact of the faithful one:

- `number`: a quantity (Chinese numerals, Arabic digits or both: 七欧元, 3万, 1.5亿);
- `date`: a year, a month or a day;
- `name`: a person or an organisation the documents do not name;
- `place`: a place the documents do not name;
- `negation`: a stated fact negated, or a negated one stated;
- `extra`: an invented clause added to the answer.

Most items are in Simplified Chinese, some in Traditional. The items split in two halves:
`DEV` may be read while developing the detector, `HELDOUT` is only scored for the report.
Records are in the native record shape with `label = {hallucinated, kind, split, item,
script}`; nothing here fits a model.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

KINDS = ("number", "date", "name", "place", "negation", "extra")


@dataclass(frozen=True, slots=True)
class Item:
    question: str
    documents: tuple[str, str]
    faithful: str
    # (kind, what the faithful answer says, what the planted one says instead); for
    # `extra`, ("extra", "", the invented clause), added before the answer's last stop.
    errors: tuple[tuple[str, str, str], ...]
    script: str = "simplified"


def _planted(item: Item, old: str, new: str, kind: str) -> str:
    if kind == "extra":
        body = item.faithful.rstrip("。")
        return f"{body}，{new}。"
    if old not in item.faithful:
        raise ValueError(f"{old!r} is not in {item.faithful!r}")
    return item.faithful.replace(old, new, 1)


DEV: tuple[Item, ...] = (
    Item(
        "北风面包店的黑麦面包卖多少钱？",
        (
            "北风面包店由伊万·拉斯克于一九三一年在哈尔滨创立。店里的黑麦面包每个售价七欧元，每天早上六点出炉。",
            "面包店每年消耗大约十二公斤的蜂蜜，用于制作节日点心。店铺周一不营业。",
        ),
        "这家店的黑麦面包一个要七欧元，清晨六点就能买到刚烤好的。",
        (
            ("number", "七欧元", "十五欧元"),
            ("number", "六点", "九点"),
            ("extra", "", "而且曾在国际烘焙大赛上获得金奖"),
        ),
    ),
    Item(
        "北风面包店是谁在什么时候创办的？",
        (
            "北风面包店由伊万·拉斯克于一九三一年在哈尔滨创立。店里的黑麦面包每个售价七欧元。",
            "拉斯克去世后，面包店由他的女儿继承经营。店铺周一不营业。",
        ),
        "它是伊万·拉斯克在一九三一年开办的，地点在哈尔滨。",
        (
            ("date", "一九三一", "一九七五"),
            ("name", "伊万·拉斯克", "玛丽·格兰特"),
            ("place", "哈尔滨", "大连"),
            ("extra", "", "后来又在莫斯科开设了三家分店"),
        ),
    ),
    Item(
        "青石农场每公顷产多少蜂蜜？",
        (
            "青石农场位于云南大理，占地四十公顷。农场的养蜂场每公顷每年可产蜂蜜十二公斤。",
            "农场主陈立新在2008年接手农场，此后改为有机种植。",
        ),
        "按照资料，青石农场的蜂蜜年产量约为每公顷十二公斤。",
        (
            ("number", "十二公斤", "四十公斤"),
            ("extra", "", "其蜂蜜还获得过国家级金奖"),
            ("place", "青石农场", "大理苍山农场"),
        ),
    ),
    Item(
        "陈立新是哪一年接手青石农场的？",
        (
            "青石农场位于云南大理，占地四十公顷。农场的养蜂场每公顷每年可产蜂蜜十二公斤。",
            "农场主陈立新在2008年接手农场，此后改为有机种植。",
        ),
        "陈立新从2008年起经营这座农场，并把它转成了有机种植。",
        (
            ("date", "2008", "2015"),
            ("name", "陈立新", "王建国"),
            ("negation", "并把它转成了有机种植", "但没有把它转成有机种植"),
        ),
    ),
    Item(
        "海港图书馆有多少册藏书？",
        (
            "海港图书馆始建于1956年，目前藏书约二十三万册，其中古籍三千二百册。",
            "图书馆每周开放六天，周二闭馆。馆长是李秀英。",
        ),
        "该馆目前大约收藏了23万册图书，古籍有3200册。",
        (
            ("number", "23万", "45万"),
            ("number", "3200", "5800"),
            ("extra", "", "并且拥有全省最大的数字档案库"),
        ),
    ),
    Item(
        "海港图书馆哪天不开放？",
        (
            "海港图书馆始建于1956年，目前藏书约二十三万册。",
            "图书馆每周开放六天，周二闭馆。馆长是李秀英。",
        ),
        "它一周只有星期二关门，其余六天都对读者开放。",
        (
            ("number", "六天", "五天"),
            ("negation", "其余六天都对读者开放", "其余六天也不对读者开放"),
            ("extra", "", "节假日还会延长开放到午夜"),
        ),
    ),
    Item(
        "松岭缆车全长多少？",
        (
            "松岭缆车于一九九八年建成，全长二千四百米，单程需要十二分钟。",
            "缆车由瑞士的施泰纳公司设计，每小时可运送八百名游客。",
        ),
        "松岭缆车总长2400米，坐一趟大约需要十二分钟。",
        (
            ("number", "2400米", "3600米"),
            ("number", "十二分钟", "二十分钟"),
            ("name", "松岭缆车总长", "由奥地利多普尔公司设计的松岭缆车总长"),
        ),
    ),
    Item(
        "松岭缆车是哪家公司设计的？",
        (
            "松岭缆车于一九九八年建成，全长二千四百米，单程需要十二分钟。",
            "缆车由瑞士的施泰纳公司设计，每小时可运送八百名游客。",
        ),
        "负责设计的是瑞士的施泰纳公司，缆车在一九九八年落成。",
        (
            ("name", "施泰纳公司", "多普尔公司"),
            ("place", "瑞士", "德国"),
            ("date", "一九九八", "二〇〇五"),
        ),
    ),
    Item(
        "白鹭合唱团有多少名成员？",
        (
            "白鹭合唱团成立于1987年，现有成员六十四人，其中女高音十八人。",
            "合唱团的指挥是周慧敏，每周四晚上在市文化馆排练。",
        ),
        "合唱团眼下共有64名团员，女高音占了18位。",
        (
            ("number", "64名", "46名"),
            ("number", "18位", "24位"),
            ("extra", "", "去年还赴维也纳参加了世界合唱节"),
        ),
    ),
    Item(
        "白鹭合唱团在哪里排练？",
        (
            "白鹭合唱团成立于1987年，现有成员六十四人。",
            "合唱团的指挥是周慧敏，每周四晚上在市文化馆排练。",
        ),
        "他们每个星期四的晚上在市文化馆练习，由周慧敏担任指挥。",
        (
            ("name", "周慧敏", "刘德明"),
            ("place", "市文化馆", "市体育馆"),
            ("date", "星期四", "星期六"),
        ),
    ),
    Item(
        "長灘燈塔有多高？",
        (
            "長灘燈塔建於一八七四年，塔高三十二米，燈光可照到二十海里外。",
            "燈塔現由海事局管理，一九九〇年改為自動化運作。",
        ),
        "這座燈塔高達32米，光線能傳到二十海里之外。",
        (
            ("number", "32米", "45米"),
            ("number", "二十海里", "五十海里"),
            ("extra", "", "塔頂還設有一座小型氣象站"),
        ),
        script="traditional",
    ),
    Item(
        "長灘燈塔什麼時候改為自動化？",
        (
            "長灘燈塔建於一八七四年，塔高三十二米。",
            "燈塔現由海事局管理，一九九〇年改為自動化運作。",
        ),
        "從1990年起，這座燈塔就不再需要人工看守，改由自動系統運作。",
        (
            ("date", "1990", "1965"),
            ("negation", "就不再需要人工看守", "仍然需要人工看守"),
            ("name", "改由自動系統運作", "改由港務公司以自動系統運作"),
        ),
        script="traditional",
    ),
    Item(
        "红杉动物园的熊猫馆什么时候开放？",
        (
            "红杉动物园的熊猫馆于2019年5月开放，馆内饲养两只大熊猫。",
            "动物园门票成人票价八十元，儿童半价。园长是赵明远。",
        ),
        "熊猫馆是在2019年5月对外开放的，里面养着两只大熊猫。",
        (
            ("date", "2019年5月", "2021年5月"),
            ("date", "5月", "9月"),
            ("number", "两只", "五只"),
            ("extra", "", "其中一只是从美国圣地亚哥动物园借来的"),
        ),
    ),
    Item(
        "红杉动物园成人门票多少钱？",
        (
            "红杉动物园的熊猫馆于2019年5月开放，馆内饲养两只大熊猫。",
            "动物园门票成人票价八十元，儿童半价。园长是赵明远。",
        ),
        "大人进园要花80元，小孩只需付一半。",
        (
            ("number", "80元", "120元"),
            ("negation", "小孩只需付一半", "小孩不能享受半价"),
            ("extra", "", "六十五岁以上的老人可以免费入园"),
        ),
    ),
    Item(
        "金河钢铁厂去年的营收是多少？",
        (
            "金河钢铁厂总部设在包头，去年营收达到1.5亿元，比前年增长百分之十二。",
            "工厂共有员工两千三百人，董事长为孙国华。",
        ),
        "据报道，该厂去年收入为一点五亿元，同比增长12%。",
        (
            ("number", "一点五亿元", "三亿元"),
            ("number", "12%", "25%"),
            ("place", "该厂", "位于唐山的该厂"),
        ),
    ),
    Item(
        "月湖公园的游船几点开始营业？",
        (
            "月湖公园的游船每天上午八点半开始营业，晚上九点停止售票。",
            "游船码头位于公园东门附近，每条船最多乘坐六人，每小时租金四十元。",
        ),
        "游船早上8点半就开门了，到晚上9点不再卖票。",
        (
            ("number", "8点半", "10点半"),
            ("place", "游船早上", "西门的游船早上"),
            ("extra", "", "夏天还会推出夜游项目"),
        ),
    ),
    Item(
        "月湖公园的游船怎么收费？",
        (
            "月湖公园的游船每天上午八点半开始营业，晚上九点停止售票。",
            "游船码头位于公园东门附近，每条船最多乘坐六人，每小时租金四十元。",
        ),
        "租一条船一个小时要付四十块钱，一条船最多能坐六个人。",
        (
            ("number", "四十块钱", "六十块钱"),
            ("number", "六个人", "八个人"),
            ("negation", "最多能坐六个人", "不能坐六个人"),
        ),
    ),
    Item(
        "鸿运出版社去年出版了多少本书？",
        (
            "鸿运出版社成立于1993年，总部在成都，去年共出版新书二百一十种。",
            "出版社的社长是黄立群，旗下有三家书店。",
        ),
        "去年这家出版社一共推出了210种新书，总部设在成都。",
        (
            ("number", "210种", "350种"),
            ("place", "成都", "重庆"),
            ("name", "去年这家出版社", "去年黄立群和郭敬文领导的这家出版社"),
        ),
    ),
    Item(
        "雲杉茶園每年產多少茶葉？",
        (
            "雲杉茶園位於南投鹿谷，茶園面積十五公頃，每年產茶約八千斤。",
            "茶園由林家經營已有三代，主要生產凍頂烏龍茶。",
        ),
        "茶園一年的產量大約是八千斤，以凍頂烏龍為主。",
        (
            ("number", "八千斤", "一萬二千斤"),
            ("extra", "", "曾多次在比賽中奪得特等獎"),
            ("place", "茶園一年", "阿里山的茶園一年"),
        ),
        script="traditional",
    ),
    Item(
        "金河钢铁厂有多少员工，董事长是谁？",
        (
            "金河钢铁厂总部设在包头，去年营收达到1.5亿元。",
            "工厂共有员工两千三百人，董事长为孙国华。",
        ),
        "厂里有2300名职工，孙国华任董事长。",
        (
            ("number", "2300名", "3200名"),
            ("name", "孙国华", "钱志强"),
            ("extra", "", "他此前担任过宝钢的副总经理"),
        ),
    ),
)


HELDOUT: tuple[Item, ...] = (
    Item(
        "晨光小学有多少学生？",
        (
            "晨光小学创办于一九六二年，现有学生八百五十名，教师四十六名。",
            "学校位于杭州西湖区，校长是吴静怡。学校设有一个天文观测台。",
        ),
        "学校如今有850名学生和46位老师。",
        (
            ("number", "850名", "1200名"),
            ("number", "46位", "64位"),
            ("extra", "", "其中三分之一是住校生"),
        ),
    ),
    Item(
        "晨光小学在哪里，校长是谁？",
        (
            "晨光小学创办于一九六二年，现有学生八百五十名。",
            "学校位于杭州西湖区，校长是吴静怡。学校设有一个天文观测台。",
        ),
        "它坐落在杭州的西湖区，现任校长为吴静怡。",
        (
            ("place", "西湖区", "拱墅区"),
            ("name", "吴静怡", "郑美玲"),
            ("extra", "", "她曾获得全国优秀教师称号"),
        ),
    ),
    Item(
        "蓝湾渡轮单程要多久？",
        (
            "蓝湾渡轮往返于青岛和长岛之间，单程航行三小时二十分钟。",
            "渡轮每天两班，船票成人一百二十元。船长是马海涛。",
        ),
        "从青岛坐船到长岛，一趟要航行三个小时二十分钟左右。",
        (
            ("number", "三个小时", "五个小时"),
            ("place", "长岛", "烟台"),
            ("extra", "", "冬季因海面结冰会停航两个月"),
        ),
    ),
    Item(
        "蓝湾渡轮的船票多少钱？",
        (
            "蓝湾渡轮往返于青岛和长岛之间，单程航行三小时二十分钟。",
            "渡轮每天两班，船票成人一百二十元。船长是马海涛。",
        ),
        "成年人的票价是120元，每天开两趟。",
        (
            ("number", "120元", "210元"),
            ("number", "两趟", "四趟"),
            ("name", "每天开两趟", "每天由马海涛和林志远的船队开两趟"),
        ),
    ),
    Item(
        "玉泉酒庄种了多少葡萄？",
        (
            "玉泉酒庄位于宁夏贺兰山东麓，葡萄园面积一百八十公顷，主要种植赤霞珠。",
            "酒庄于2003年由法国酿酒师皮埃尔·杜邦参与创建，年产葡萄酒六十万瓶。",
        ),
        "酒庄的葡萄园有180公顷，以赤霞珠为主。",
        (
            ("number", "180公顷", "260公顷"),
            ("extra", "", "园中还种有少量的雷司令"),
            ("place", "酒庄的葡萄园", "位于甘肃的酒庄的葡萄园"),
        ),
    ),
    Item(
        "玉泉酒庄是哪年创建的？谁参与了创建？",
        (
            "玉泉酒庄位于宁夏贺兰山东麓，葡萄园面积一百八十公顷。",
            "酒庄于2003年由法国酿酒师皮埃尔·杜邦参与创建，年产葡萄酒六十万瓶。",
        ),
        "2003年，法国酿酒师皮埃尔·杜邦协助建立了这座酒庄，现在每年出产60万瓶酒。",
        (
            ("date", "2003", "1996"),
            ("name", "皮埃尔·杜邦", "让·马丁"),
            ("number", "60万瓶", "200万瓶"),
        ),
    ),
    Item(
        "雪峰滑雪学校的课程多少钱？",
        (
            "雪峰滑雪学校开设初级课程，每节课九十分钟，收费三百五十元。",
            "学校共有教练二十八名，雪季从十二月持续到次年三月。",
        ),
        "初级课一节一个半小时，价格是350元。",
        (
            ("number", "350元", "530元"),
            ("negation", "价格是350元", "价格不是350元"),
            ("extra", "", "报满十节课可以获赠一套滑雪装备"),
        ),
    ),
    Item(
        "雪峰滑雪学校的雪季是什么时候？",
        (
            "雪峰滑雪学校开设初级课程，每节课九十分钟，收费三百五十元。",
            "学校共有教练二十八名，雪季从十二月持续到次年三月。",
        ),
        "雪季从12月开始，一直到第二年的3月结束，学校有28位教练。",
        (
            ("date", "12月", "11月"),
            ("date", "3月", "5月"),
            ("number", "28位", "82位"),
        ),
    ),
    Item(
        "東嶼博物館收藏了多少件文物？",
        (
            "東嶼博物館成立於一九七八年，館藏文物一萬二千件，其中青銅器四百件。",
            "博物館位於台南，館長是林文雄。每週一休館。",
        ),
        "館內共收藏約12000件文物，青銅器有四百件。",
        (
            ("number", "12000件", "21000件"),
            ("number", "四百件", "九百件"),
            ("extra", "", "鎮館之寶是一件唐代的金冠"),
        ),
        script="traditional",
    ),
    Item(
        "東嶼博物館在哪裡？館長是誰？",
        (
            "東嶼博物館成立於一九七八年，館藏文物一萬二千件。",
            "博物館位於台南，館長是林文雄。每週一休館。",
        ),
        "博物館設在台南，由林文雄擔任館長，週一不開放。",
        (
            ("place", "台南", "高雄"),
            ("name", "林文雄", "黃志明"),
            ("negation", "週一不開放", "週一照常開放"),
        ),
        script="traditional",
    ),
    Item(
        "翠谷水坝有多高？",
        (
            "翠谷水坝于1972年竣工，坝高一百一十米，水库库容四点二亿立方米。",
            "水坝的电站装机容量为三十万千瓦，由水利局负责运营。",
        ),
        "这座坝高110米，水库能蓄水4.2亿立方米。",
        (
            ("number", "110米", "160米"),
            ("number", "4.2亿", "7.5亿"),
            ("extra", "", "它也是亚洲第一座拱形水坝"),
        ),
    ),
    Item(
        "翠谷水坝是哪一年竣工的？",
        (
            "翠谷水坝于1972年竣工，坝高一百一十米。",
            "水坝的电站装机容量为三十万千瓦，由水利局负责运营。",
        ),
        "它在一九七二年完工，目前由水利局运营。",
        (
            ("date", "一九七二", "一九八四"),
            ("name", "水利局", "长江电力公司"),
            ("negation", "目前由水利局运营", "目前已不由水利局运营"),
        ),
    ),
    Item(
        "星河天文台的望远镜口径多大？",
        (
            "星河天文台建在海拔三千二百米的山顶，主望远镜口径二点四米。",
            "天文台于2011年启用，台长是何志远，每年接待访客约一万五千人次。",
        ),
        "它的主镜口径为2.4米，台址海拔3200米。",
        (
            ("number", "2.4米", "4.2米"),
            ("number", "3200米", "4500米"),
            ("extra", "", "还发现过两颗新的彗星"),
        ),
    ),
    Item(
        "星河天文台每年有多少访客？",
        (
            "星河天文台建在海拔三千二百米的山顶，主望远镜口径二点四米。",
            "天文台于2011年启用，台长是何志远，每年接待访客约一万五千人次。",
        ),
        "自2011年投入使用以来，天文台每年迎来大约1.5万人次的参观者。",
        (
            ("number", "1.5万", "3万"),
            ("date", "2011", "2016"),
            ("name", "天文台每年", "何志远领导的国家天文中心每年"),
        ),
    ),
    Item(
        "銀杏消防站有幾輛消防車？",
        (
            "銀杏消防站成立於2001年，配備消防車六輛，消防員四十五名。",
            "消防站位於新竹市東區，站長是張建華。",
        ),
        "站裡有6輛消防車，共45名消防員。",
        (
            ("number", "6輛", "9輛"),
            ("number", "45名", "54名"),
            ("place", "站裡有", "新竹市北區的站裡有"),
        ),
        script="traditional",
    ),
    Item(
        "銀杏消防站的站長是誰？",
        (
            "銀杏消防站成立於2001年，配備消防車六輛。",
            "消防站位於新竹市東區，站長是張建華。",
        ),
        "張建華是這個消防站的站長，消防站設在新竹市東區。",
        (
            ("name", "張建華", "陳家豪"),
            ("place", "東區", "香山區"),
            ("extra", "", "他曾參與九二一地震的救援"),
        ),
        script="traditional",
    ),
)

ITEMS = {"dev": DEV, "heldout": HELDOUT}


def build(split: str = "all") -> list[dict[str, object]]:
    """The probe's records: each item's faithful answer and its planted ones."""
    splits = ("dev", "heldout") if split == "all" else (split,)
    records: list[dict[str, object]] = []
    for name in splits:
        for n, item in enumerate(ITEMS[name]):
            answers = [("faithful", item.faithful)]
            answers += [(kind, _planted(item, old, new, kind)) for kind, old, new in item.errors]
            for kind, answer in answers:
                records.append(
                    {
                        "request": item.question,
                        "retrieved_context": [
                            {"content": doc, "id": f"{name}-{n}-{d}"}
                            for d, doc in enumerate(item.documents)
                        ],
                        "response": answer,
                        "label": {
                            "hallucinated": kind != "faithful",
                            "kind": kind,
                            "split": name,
                            "item": f"{name}-{n}",
                            "script": item.script,
                        },
                    }
                )
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="all")
    args = parser.parse_args(argv)
    lines = [json.dumps(r, ensure_ascii=False) for r in build(args.split)]
    text = "\n".join(lines) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
