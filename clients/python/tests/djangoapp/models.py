from django.db import models

from hilo.django import HiloBigAutoField


class Order(models.Model):
    id = HiloBigAutoField(primary_key=True)  # sequence: djangoapp_order
    note = models.TextField()


class Line(models.Model):
    id = HiloBigAutoField(primary_key=True, sequence="djangoapp_lines")
    order = models.ForeignKey(Order, on_delete=models.CASCADE)
