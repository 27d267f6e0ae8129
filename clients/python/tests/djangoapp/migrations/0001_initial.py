import django.db.models.deletion
from django.db import migrations, models

import hilo.django


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        hilo.django.CreateHiloSequence("djangoapp_order", start_value=1000000, block_size=100),
        hilo.django.CreateHiloSequence("djangoapp_lines", start_value=5000000, block_size=100),
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", hilo.django.HiloBigAutoField(primary_key=True, serialize=False)),
                ("note", models.TextField()),
            ],
        ),
        migrations.CreateModel(
            name="Line",
            fields=[
                ("id", hilo.django.HiloBigAutoField(primary_key=True, serialize=False, sequence="djangoapp_lines")),
                ("order", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="djangoapp.order")),
            ],
        ),
    ]
